"""Checkpoints survive anything: SIGKILL at a random step, SIGKILL mid-write, SIGTERM, a full disk.

The resumed runs must end with bitwise-identical weights and the same loss sequence as an
uninterrupted run (CPU, fixed thread count, dropout on: the torch RNG state is restored).
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from synthetic import make_data_dir

from clozeformer.train import checkpoint as ckpt_io
from clozeformer.train.loop import pretrain
from clozeformer.train.metrics_file import read_metrics
from clozeformer.train.pretrain_config import PretrainConfig
from clozeformer.utils.errors import ClozeformerError

pytestmark = pytest.mark.e2e  # subprocesses, kills, servers: the full suite, not the fast one

STEPS = 18
RUN_FLAGS = [
    "--max-steps",
    str(STEPS),
    "--batch-size",
    "16",
    "--lr",
    "1e-3",
    "--warmup-steps",
    "3",
    "--save-every",
    "3",
    "--eval-every",
    "5",
    "--keep-last",
    "10",
    "--no-progress",
    "--threads",
    "1",
    "--dropout",
    "0.1",
]  # dropout on: resume must restore the torch RNG stream too


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("ckpt_data"))


def command(data_dir: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "clozeformer", "pretrain", "--data", str(data_dir), "--out", str(out), *RUN_FLAGS]


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", **extra}


def train_losses(run: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in read_metrics(run) if r["kind"] == "train"]


def assert_same_run(a: Path, b: Path) -> None:
    assert train_losses(a) == train_losses(b)
    assert [s for s, _ in train_losses(a)] == list(range(1, STEPS + 1))
    wa = load_file(str(a / "checkpoints" / f"step-{STEPS:06d}" / "model.safetensors"))
    wb = load_file(str(b / "checkpoints" / f"step-{STEPS:06d}" / "model.safetensors"))
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture(scope="module")
def reference(data_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "run"
    subprocess.run(command(data_dir, out), env=env(), check=True, capture_output=True)
    return out


def wait_for(predicate, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline, "timed out waiting for the run"
        time.sleep(0.005)


def logged_steps(run: Path) -> int:
    return sum(1 for r in read_metrics(run) if r["kind"] == "train")


# ----------------------------------------------------------------------------- kill tests (subprocesses)


def test_sigkill_at_random_step_then_resume_is_bitwise_identical(data_dir, reference, tmp_path):
    out = tmp_path / "run"
    kill_after = random.Random(1234).randint(4, STEPS - 6)
    proc = subprocess.Popen(command(data_dir, out), env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: logged_steps(out) >= kill_after, proc)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    done_before = [s for s, _ in ckpt_io.list_checkpoints(out)]
    assert STEPS not in done_before
    res = subprocess.run(command(data_dir, out), env=env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    expected_from = max(done_before, default=0)
    if expected_from:
        assert f"resuming from {out / 'checkpoints' / f'step-{expected_from:06d}'}" in res.stdout
    assert_same_run(reference, out)
    evals = [r for r in read_metrics(out) if r["kind"] == "eval"]
    assert evals == [r for r in read_metrics(reference) if r["kind"] == "eval"]


def test_sigkill_during_checkpoint_write_resumes_from_previous(data_dir, reference, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        command(data_dir, out), env=env(CLOZEFORMER_DEBUG_CKPT_SLEEP="9:60"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    ckpts = out / "checkpoints"

    def half_written() -> bool:  # the hidden temporary of step 9 holds weights, not yet trainer state
        return ckpts.is_dir() and any(
            p.name.startswith(".step-000009") and (p / "model.safetensors").is_file() for p in ckpts.iterdir()
        )

    wait_for(half_written, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert [s for s, _ in ckpt_io.list_checkpoints(out)] == [3, 6]  # step 9 is invisible
    assert not (ckpts / "step-000009").exists()
    res = subprocess.run(command(data_dir, out), env=env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert f"resuming from {ckpts / 'step-000006'}" in res.stdout
    assert not [p for p in ckpts.iterdir() if p.name.startswith(".")]  # leftovers cleaned
    assert_same_run(reference, out)


def test_sigterm_checkpoints_then_exits_and_resumes(data_dir, reference, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(command(data_dir, out), env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: logged_steps(out) >= 4, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "received SIGTERM" in err
    stopped_at = ckpt_io.list_checkpoints(out)[-1][0]
    assert stopped_at == logged_steps(out) < STEPS  # checkpointed exactly where it stopped
    state = ckpt_io.load_trainer_state(ckpt_io.latest_checkpoint(out))
    assert state["reason"] == "SIGTERM"
    res = subprocess.run(command(data_dir, out), env=env(), capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert_same_run(reference, out)


# ----------------------------------------------------------------------------- failed writes (in process)


def small_cfg(data_dir: Path, out: Path, **kw) -> PretrainConfig:
    base = dict(
        data=str(data_dir),
        out=str(out),
        model="tiny",
        batch_size=8,
        lr=1e-3,
        progress=False,
        report_to=["none"],
        save_every=3,
        keep_last=5,
    )
    return PretrainConfig(**{**base, **kw})


def fail_saving_step(monkeypatch, step: int) -> None:
    real = torch.save

    def save(obj, f, *a, **k):
        if Path(f).parent.name.startswith(f".step-{step:06d}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(obj, f, *a, **k)

    monkeypatch.setattr(ckpt_io.torch, "save", save)


def test_failed_periodic_write_keeps_previous_and_continues(data_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    fail_saving_step(monkeypatch, 6)
    summary = pretrain(small_cfg(data_dir, out, max_steps=9))
    err = capsys.readouterr().err
    assert "checkpoint step-000006 was NOT written (" in err and "No space left on device" in err
    assert f"the previous checkpoint {out / 'checkpoints' / 'step-000003'} is intact" in err
    assert [s for s, _ in ckpt_io.list_checkpoints(out)] == [3, 9]
    assert not [p for p in (out / "checkpoints").iterdir() if p.name.startswith(".")]
    assert summary["step"] == 9
    events = [r for r in read_metrics(out) if r["kind"] == "event"]
    assert events and events[0]["event"] == "checkpoint_failed" and events[0]["step"] == 6


def test_failed_final_write_is_an_error_naming_the_good_checkpoint(data_dir, tmp_path, monkeypatch):
    out = tmp_path / "run"
    fail_saving_step(monkeypatch, 5)
    with pytest.raises(ClozeformerError, match=r"step-000005 was NOT written.*step-000003 is intact"):
        pretrain(small_cfg(data_dir, out, max_steps=5))
    good = ckpt_io.latest_checkpoint(out)
    assert good.name == "step-000003"
    from clozeformer.modeling.bert import BertForMaskedLM

    BertForMaskedLM.from_pretrained(good)  # complete and loadable


# ----------------------------------------------------------------------------- units


def fake_checkpoint(run: Path, step: int, keep_last: int = 2) -> Path:
    tok = run.parent / "tok"
    tok.mkdir(exist_ok=True)
    (tok / "vocab.txt").write_text("[PAD]\n[UNK]\n", encoding="utf-8")

    def write_model(d: Path) -> None:
        (d / "config.json").write_text("{}", encoding="utf-8")

    return ckpt_io.save_checkpoint(
        run,
        step,
        write_model=write_model,
        tokenizer_dir=tok,
        optimizer_state={"state": {}, "param_groups": []},
        rng_blobs=[ckpt_io.rng_bytes()],
        trainer_state={"step": step, "tokens": 0, "elapsed_s": 0.0, "loader": []},
        keep_last=keep_last,
    )


def test_keep_last_and_hidden_leftovers(tmp_path):
    run = tmp_path / "run"
    for step in (1, 2, 3):
        fake_checkpoint(run, step)
    assert [s for s, _ in ckpt_io.list_checkpoints(run)] == [2, 3]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000002", "step-000003"]
    (run / "checkpoints" / ".step-000004.abc.tmp").mkdir()
    (run / "checkpoints" / "step-000005").mkdir()  # no trainer_state.json: not a checkpoint
    assert ckpt_io.latest_checkpoint(run).name == "step-000003"
    assert ckpt_io.clean_partial(run) == [".step-000004.abc.tmp"]
    ckpt = ckpt_io.latest_checkpoint(run)
    assert (ckpt / "vocab.txt").read_text(encoding="utf-8").startswith("[PAD]")
    assert ckpt_io.load_optimizer_file(ckpt) == {"state": {}, "param_groups": []}


def test_unreadable_state_is_a_clear_error(tmp_path):
    ckpt = fake_checkpoint(tmp_path / "run", 7)
    (ckpt / "optimizer.pt").write_bytes(b"not a zip")
    with pytest.raises(ClozeformerError, match="optimizer.pt: unreadable optimizer state"):
        ckpt_io.load_optimizer_file(ckpt)
    (ckpt / "trainer_state.json").write_text("{", encoding="utf-8")
    with pytest.raises(ClozeformerError, match="trainer_state.json: unreadable trainer state"):
        ckpt_io.load_trainer_state(ckpt)
    with pytest.raises(ClozeformerError, match="not a pretraining checkpoint"):
        ckpt_io.load_trainer_state(tmp_path)


def test_damaged_newest_checkpoint_falls_back_to_the_previous_one(data_dir, reference, tmp_path, capsys):
    """A garbage RNG file or a mistyped trainer_state.json in the newest checkpoint: one warning
    naming the file, then the previous whole checkpoint is resumed, and the run ends bitwise as
    the uninterrupted one. With every checkpoint damaged: one error line, exit 2."""
    import shutil

    from clozeformer.commands.cli import main as cli_main

    out = tmp_path / "run"
    shutil.copytree(reference, out)  # a finished run: checkpoints 3, 6, ..., 18
    argv = ["pretrain", "--data", str(data_dir), "--out", str(out), *RUN_FLAGS]
    ckpts = out / "checkpoints"
    (ckpts / f"step-{STEPS:06d}" / "rng_rank0.safetensors").write_bytes(b"\x00garbage")
    res = subprocess.run(command(data_dir, out), env=env(), capture_output=True, text=True)  # steps 16-18 again
    assert res.returncode == 0, res.stderr
    assert f"warning: not resuming from step-{STEPS:06d}:" in res.stderr
    assert "rng_rank0.safetensors: unreadable RNG state" in res.stderr
    assert f"resuming from the previous checkpoint, step-{STEPS - 3:06d}" in res.stderr
    assert_same_run(reference, out)
    # every checkpoint damaged: the newest one's error, one line
    for _, ckpt in ckpt_io.list_checkpoints(out):
        state = json.loads((ckpt / "trainer_state.json").read_text())
        (ckpt / "trainer_state.json").write_text(json.dumps({**state, "step": "x"}))
    assert cli_main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and f"step-{STEPS:06d}/trainer_state.json: step must be a non-negative integer, got 'x'" in err[0]


def test_rng_state_round_trip():
    random.random(), np.random.normal(), random.gauss(0, 1)  # python keeps a cached gaussian
    state = ckpt_io.rng_state()
    from safetensors.torch import load, save

    state = load(save(state))  # through the on-disk format
    first = (random.random(), random.gauss(0, 1), np.random.rand(3).tolist(), np.random.normal(), torch.rand(3))
    ckpt_io.set_rng_state(state)
    again = (random.random(), random.gauss(0, 1), np.random.rand(3).tolist(), np.random.normal(), torch.rand(3))
    assert first[:4] == again[:4] and torch.equal(first[4], again[4])
    # preserve_rng: draws inside the block leave every stream where it was
    ckpt_io.set_rng_state(state)
    with ckpt_io.preserve_rng():
        torch.rand(5), random.random(), np.random.rand()
    after = (random.random(), np.random.rand(), torch.rand(3))
    ckpt_io.set_rng_state(state)
    expected = (random.random(), np.random.rand(), torch.rand(3))
    assert after[:2] == expected[:2] and torch.equal(after[2], expected[2])


def test_trainer_state_records_every_rank_and_config(data_dir, tmp_path):
    out = tmp_path / "run"
    pretrain(small_cfg(data_dir, out, max_steps=3))
    ckpt = ckpt_io.latest_checkpoint(out)
    state = json.loads((ckpt / "trainer_state.json").read_text(encoding="utf-8"))
    assert state["step"] == 3 and state["tokens"] == 3 * 8 * 32 and state["world_size"] == 1
    assert state["config"]["batch_size"] == 8 and state["loader"][0]["position"] == 3
    assert {
        "config.json",
        "model.safetensors",
        "vocab.txt",
        "tokenizer_config.json",
        "optimizer.pt",
        "rng_rank0.safetensors",
        "trainer_state.json",
    } <= {p.name for p in ckpt.iterdir()}
    assert (ckpt / "vocab.txt").read_bytes() == (data_dir / "tokenizer" / "vocab.txt").read_bytes()
