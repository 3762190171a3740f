"""What the tracking tests share: a hermetic wandb/MLflow environment and readers of what they wrote
(an MLflow metric history, an offline wandb run file)."""

from __future__ import annotations

import json
import struct
from pathlib import Path


def hermetic_tracking(tmp_path, monkeypatch) -> None:
    """wandb offline and quiet, every wandb and MLflow location under tmp_path, no telemetry, no inherited settings."""
    home = tmp_path / "home"
    for var in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        (home / var).mkdir(parents=True)
        monkeypatch.setenv(var, str(home / var))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlflow-store").as_uri())
    for var in ("WANDB_PROJECT", "WANDB_API_KEY", "WANDB_RUN_ID", "WANDB_RESUME", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # set by clozeformer; undone after the test


def mlflow_client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def wandb_records(path: str | Path):
    """The records of an offline run's .wandb file (a LevelDB-style log of protobuf `Record`s)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B" and magic == 0xBEE1
    pos, chunk = 7, b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768  # records never straddle a 32 KiB block header
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:  # block padding
            pos += left
            continue
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST
            record = pb.Record()
            record.ParseFromString(chunk)
            chunk = b""
            yield record


def wandb_run(path: str | Path) -> dict:
    """An offline run as {"run": its run record, "config": {...}, "history": [row, ...], "summary": {...}}."""

    def items(updates) -> dict:
        return {(u.key or "/".join(u.nested_key)): json.loads(u.value_json) for u in updates}

    out: dict = {"history": [], "summary": {}}
    for r in wandb_records(path):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            out["run"], out["config"] = r.run, items(r.run.config.update)
        elif kind == "history":
            out["history"].append(items(r.history.item))
        elif kind == "summary":
            out["summary"].update(items(r.summary.update))
    return out
