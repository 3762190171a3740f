"""Pretraining reports to wandb (offline) and MLflow together and resumes into the same runs: wandb starts its
service process, so this is an end-to-end test."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pytest
from synthetic import prepare_data, train_tokenizer, write_corpus
from tracking_helpers import hermetic_tracking, history, mlflow_client, wandb_run

from clozeformer.commands.cli import main as cli_main
from clozeformer.train.metrics_file import read_metrics
from clozeformer.train.tracking import STATE_FILE


@pytest.fixture(autouse=True)
def hermetic(tmp_path, monkeypatch):
    hermetic_tracking(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tracking_data")
    write_corpus(root / "corpus.txt", 120)
    train_tokenizer(root / "corpus.txt", root / "tok")
    return prepare_data(root / "corpus.txt", root / "tok", root / "packed")


@pytest.mark.e2e  # wandb runs its service process
def test_pretrain_reports_to_wandb_and_mlflow_and_resumes_into_the_same_runs(data, tmp_path, monkeypatch):
    # defaults: wandb files and the MLflow store inside the run directory
    monkeypatch.delenv("WANDB_DIR")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.setenv("WANDB_PROJECT", "bert-tests")
    out = tmp_path / "run"
    argv = ["pretrain", "--data", str(data), "--out", str(out), "--model", "tiny", "--batch-size", "4", "--lr", "1e-3"]
    argv += ["--eval-every", "2", "--eval-batches", "1", "--no-progress", "--report-to", "wandb,mlflow"]
    assert cli_main([*argv, "--max-steps", "4"]) == 0
    state = json.loads((out / STATE_FILE).read_text())
    assert state["mlflow_tracking_uri"] == (out / "mlruns").resolve().as_uri()
    client = mlflow_client(state["mlflow_tracking_uri"])
    run_id = state["mlflow_run_id"]

    def check_mlflow(last_step: int) -> None:
        records = read_metrics(out)
        train = [r for r in records if r["kind"] == "train"]
        evals = [r for r in records if r["kind"] == "eval"]
        assert [r["step"] for r in train] == list(range(1, last_step + 1))
        assert [r["step"] for r in evals] == list(range(2, last_step + 1, 2))
        for key in ("loss", "mlm_acc", "lr", "grad_norm", "tokens"):
            assert history(client, run_id, f"train/{key}") == [(r["step"], r[key]) for r in train]
        for key in ("val_mlm_loss", "val_mlm_acc", "val_ppl"):
            assert history(client, run_id, f"eval/{key}") == [(r["step"], r[key]) for r in evals]
        assert client.get_run(run_id).info.status == "FINISHED"

    check_mlflow(4)
    run = client.get_run(run_id)
    assert run.info.run_name == "run" and client.get_experiment(run.info.experiment_id).name == "clozeformer"
    assert run.data.params["max_steps"] == "4" and run.data.params["lr"] == "0.001"
    assert run.data.params["report_to"] == '["wandb", "mlflow"]'

    [first] = glob.glob(str(out / "wandb" / "offline-run-*" / f"run-{state['wandb_run_id']}.wandb"))
    w = wandb_run(first)
    assert w["run"].run_id == state["wandb_run_id"] and w["run"].display_name == "run"
    assert w["run"].project == "bert-tests"
    assert w["config"]["lr"] == 1e-3 and w["config"]["max_steps"] == 4 and w["config"]["model"] == "tiny"
    train = [r for r in read_metrics(out) if r["kind"] == "train"]
    rows = [h for h in w["history"] if "train/loss" in h]
    assert [(h["step"], h["train/loss"], h["train/lr"]) for h in rows] == [(r["step"], r["loss"], r["lr"]) for r in train]
    last_eval = [r for r in read_metrics(out) if r["kind"] == "eval"][-1]
    assert w["summary"]["eval/val_mlm_loss"] == last_eval["val_mlm_loss"] and w["summary"]["train/loss"] == train[-1]["loss"]

    # the same command with a larger budget resumes from step 4: same MLflow run, same wandb id
    assert cli_main([*argv, "--max-steps", "8"]) == 0
    again = json.loads((out / STATE_FILE).read_text())
    assert again == state
    check_mlflow(8)
    assert client.get_run(run_id).data.tags["resumed_from_step"] == "4"
    assert len(client.search_runs([run.info.experiment_id])) == 1
    runs = sorted(glob.glob(str(out / "wandb" / "offline-run-*" / f"run-{state['wandb_run_id']}.wandb")))
    assert len(runs) == 2  # offline, each session is a file of its own; `wandb sync` puts both in run `id`
    resumed = wandb_run(next(p for p in runs if p != first))
    steps = [h["step"] for h in resumed["history"] if "train/loss" in h]
    assert steps == [5, 6, 7, 8] and resumed["config"]["max_steps"] == 8
