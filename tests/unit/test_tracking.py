"""`--report-to`: what pretrain and finetune send to Weights & Biases (offline), MLflow (a local file
store) and TensorBoard (a stand-in writer) is what they write in their own metrics files; resumed
runs report into the same runs; a wrong name or a missing package is one error line before any work."""

from __future__ import annotations

import csv
import json
import math
import random
import sys
import types
from pathlib import Path

import pytest
from test_finetune import TINY, sentence, write_vocab
from tracking_helpers import hermetic_tracking, history, mlflow_client

from clozeformer.commands.cli import main as cli_main
from clozeformer.train.tracking import STATE_FILE, Trackers, resolve_report_to
from clozeformer.utils.errors import ClozeformerError


@pytest.fixture(autouse=True)
def hermetic(tmp_path, monkeypatch):
    hermetic_tracking(tmp_path, monkeypatch)


# ----------------------------------------------------------------------------- names and errors


def test_report_to_names(monkeypatch):
    assert resolve_report_to("wandb,mlflow") == ["wandb", "mlflow"]
    assert resolve_report_to(["wandb mlflow", "WANDB,"]) == ["wandb", "mlflow"]
    assert resolve_report_to(["none"]) == [] and resolve_report_to([]) == []
    with pytest.raises(ClozeformerError, match=r"unknown 'tb'; choose from tensorboard, wandb, mlflow, none$"):
        resolve_report_to(["wandb,tb"])
    with pytest.raises(ClozeformerError, match="'none' cannot be combined with wandb"):
        resolve_report_to(["none", "wandb"])
    # unset: tensorboard when it is installed, else nothing; asked for by name, it must be there
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    assert resolve_report_to(None) == []
    with pytest.raises(ClozeformerError, match=r"^--report-to tensorboard needs `tensorboard` \(pip install tensorboard\)$"):
        resolve_report_to(["tensorboard"])
    monkeypatch.setitem(sys.modules, "tensorboard", types.ModuleType("tensorboard"))
    assert resolve_report_to(None) == ["tensorboard"]


@pytest.mark.parametrize(
    "verb, report_to, blocked, message",
    [
        ("pretrain", "wandb,bogus", None, "unknown 'bogus'; choose from tensorboard, wandb, mlflow, none"),
        ("pretrain", "wandb", "wandb", "--report-to wandb needs `wandb` (pip install wandb)"),
        ("finetune", "tensorboard mlflow", "mlflow", "--report-to mlflow needs `mlflow` (pip install mlflow-skinny)"),
    ],
)
def test_a_wrong_name_or_missing_package_is_one_error_line_before_any_work(
    tmp_path, monkeypatch, capsys, verb, report_to, blocked, message
):
    if blocked:
        monkeypatch.setitem(sys.modules, blocked, None)  # `import blocked` fails: as if not installed
    monkeypatch.setitem(sys.modules, "tensorboard", types.ModuleType("tensorboard"))
    out = tmp_path / "out"
    common = ["--data", str(tmp_path / "no-such-data"), "--out", str(out), "--report-to", *report_to.split()]
    argv = {
        "pretrain": ["pretrain", *common, "--max-steps", "2"],
        "finetune": ["finetune", "--task", "sst2", "--model", "tiny", *common],
    }[verb]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()  # nothing read (the data dir does not even exist), nothing written


# ----------------------------------------------------------------------------- Trackers itself


def test_records_become_scalars_params_and_a_finished_or_failed_run(tmp_path):
    uri = (tmp_path / "mlflow-store").as_uri()
    config = {"lr": 0.001, "data": ["a.csv", "b.csv"], "long": "x" * 10_000, "nested": {"k": None}}
    with Trackers(["mlflow"], tmp_path / "r1", config) as t:
        t.log({"kind": "train", "step": 1, "loss": 2.5, "lr": 1e-3, "skipped": False, "grad_norm": float("nan")})
        t.log({"kind": "eval", "step": 1, "dev": {"accuracy": 0.5, "f1": None}, "note": "text"})
        t.log({"kind": "event", "step": 1, "event": "checkpoint_failed", "error": "disk full"})  # nothing numeric
    run_id = json.loads((tmp_path / "r1" / STATE_FILE).read_text())["mlflow_run_id"]
    client = mlflow_client(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "r1"
    assert set(run.data.metrics) == {"train/loss", "train/lr", "train/skipped", "eval/dev/accuracy"}
    assert history(client, run_id, "eval/dev/accuracy") == [(1, 0.5)]
    p = run.data.params
    assert p["lr"] == "0.001" and p["data"] == '["a.csv", "b.csv"]' and p["nested.k"] == "None"
    assert 500 <= len(p["long"]) < 10_000  # cut to MLflow's limit
    assert client.get_experiment(run.info.experiment_id).name == "clozeformer"

    with pytest.raises(RuntimeError), Trackers(["mlflow"], tmp_path / "r2", config):
        raise RuntimeError("training failed")
    run_id = json.loads((tmp_path / "r2" / STATE_FILE).read_text())["mlflow_run_id"]
    assert client.get_run(run_id).info.status == "FAILED"

    # another process than the main one reports nothing and writes nothing
    Trackers(["mlflow", "wandb"], tmp_path / "r3", config, enabled=False).log({"kind": "train", "step": 1, "loss": 1.0})
    assert not (tmp_path / "r3").exists()


def test_a_backend_failing_mid_run_warns_once_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    t = Trackers(["mlflow"], tmp_path / "run", {})
    t.log({"kind": "train", "step": 1, "loss": 1.0})

    def down(*a, **k):
        raise ConnectionError("server gone")

    monkeypatch.setattr(t.mlflow, "log_batch", down)
    for step in (2, 3, 4):
        t.log({"kind": "train", "step": step, "loss": 1.0})
    t.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "warning: --report-to mlflow: could not log step 2 (ConnectionError: server gone)",
        "warning: --report-to mlflow: 3 calls failed; the run's own files have every record",
    ]
    client = mlflow_client((tmp_path / "mlflow-store").as_uri())
    assert history(client, t.mlflow_run_id, "train/loss") == [(1, 1.0)]
    assert client.get_run(t.mlflow_run_id).info.status == "FINISHED"


def test_tensorboard_scalars_and_resume_purge(tmp_path, monkeypatch):
    calls: list = []

    class Writer:  # torch's SummaryWriter, recorded (tensorboard is not a test dependency)
        def __init__(self, logdir, purge_step=None):
            calls.append(("init", Path(logdir), purge_step))

        def add_scalar(self, tag, value, step):
            calls.append(("scalar", tag, value, step))

        def add_text(self, tag, text, step):
            calls.append(("text", tag, step))

        def close(self):
            calls.append(("close",))

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=Writer))
    with Trackers(["tensorboard"], tmp_path / "run", {"lr": 1.0}) as t:
        t.log({"kind": "train", "step": 3, "loss": 1.5, "error": "x"})
    assert calls == [
        ("init", tmp_path / "run" / "tb", 1),
        ("text", "config", 0),
        ("scalar", "train/loss", 1.5, 3),
        ("close",),
    ]
    calls.clear()
    Trackers(["tensorboard"], tmp_path / "run", {"lr": 1.0}, resume_step=40).close()
    assert calls == [("init", tmp_path / "run" / "tb", 41), ("close",)]  # a resumed run drops steps > 40


# ----------------------------------------------------------------------------- pretrain and finetune


def test_finetune_reports_each_evaluation_and_the_best_scores_to_mlflow(tmp_path, monkeypatch):
    from clozeformer.modeling import config

    monkeypatch.setitem(config.PRESETS, "tiny", (2, 32, 2))
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "finetune-tests")
    rng = random.Random(0)
    vocab = write_vocab(tmp_path)
    d = tmp_path / "data"
    d.mkdir()
    for split, n in (("train", 96), ("dev", 32)):
        with open(d / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            for _ in range(n):
                label = rng.choice(["pos", "neg"])
                words = sentence(rng)
                words.insert(rng.randrange(len(words)), "good" if label == "pos" else "bad")
                w.writerow([" ".join(words), label])
    out = tmp_path / "clf"
    argv = ["finetune", "--task", "classification", "--data", str(d), "--tokenizer", str(vocab), "--out", str(out)]
    assert cli_main([*argv, "--epochs", "2", "--eval-every", "4", "--report-to", "mlflow", *TINY]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert [e["step"] for e in m["history"]] == [4, 6, 8, 12]  # every 4 steps and at each epoch's end (6/epoch)
    state = json.loads((out / STATE_FILE).read_text())
    client = mlflow_client(state["mlflow_tracking_uri"])
    run_id = state["mlflow_run_id"]
    assert history(client, run_id, "eval/dev/accuracy") == [(e["step"], e["scores"]["dev"]["accuracy"]) for e in m["history"]]
    assert history(client, run_id, "train/loss") == [(e["step"], e["train_loss"]) for e in m["history"]]
    assert history(client, run_id, "best/main") == [(m["best"]["step"], m["best"]["main"])]
    assert history(client, run_id, "best/dev/accuracy") == [(m["best"]["step"], m["best"]["scores"]["dev"]["accuracy"])]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "clf"
    assert client.get_experiment(run.info.experiment_id).name == "finetune-tests"
    assert run.data.params["task"] == "classification" and run.data.params["epochs"] == "2.0"
    assert all(math.isfinite(e["train_loss"]) for e in m["history"])
