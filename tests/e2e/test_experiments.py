"""`clozeformer experiment`: each experiment runs end to end on tiny generated data."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from synthetic import cli_args, prepare_data, train_tokenizer, write_corpus

from clozeformer.commands.cli import main as cli_main

pytestmark = pytest.mark.e2e  # subprocesses, kills, servers: the full suite, not the fast one

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def corpus_data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("exp_data")
    write_corpus(root / "corpus.txt", 200)
    train_tokenizer([root / "corpus.txt", FIXTURES / "task_glue" / "SST-2"], root / "tok", vocab_size=160)
    out = {mode: prepare_data(root / "corpus.txt", root / "tok", root / mode, mode) for mode in ("packed", "nsp")}
    # a small GLUE-style SST-2 with a learnable signal, in the standard layout
    glue = root / "glue" / "SST-2"
    glue.mkdir(parents=True)
    rows = [("the cat likes the red ball .", 1), ("the dog hears a green tree .", 0)] * 24
    for split in ("train", "dev"):
        (glue / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    out["glue"] = root / "glue"
    return out


def experiment(name: str, corpus_data: dict, data: str | None = "packed", **flags) -> list[str]:
    """`experiment NAME` on the module's `data` preparation (None: no --data) and SST-2 tasks data,
    then `flags` as `cli_args` writes them (a flag given here replaces the default in place)."""
    defaults = {"data": corpus_data[data] if data else None, "tasks_data": corpus_data["glue"]}
    return cli_args("experiment", name, **{**defaults, **flags})


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,data", [("pretrain-vs-scratch", "packed"), ("mlm-vs-clm", "packed"), ("mlm-vs-rtd", "packed"), ("nsp-ablation", "nsp")]
)
def test_experiment_runs_and_reports(corpus_data, tmp_path, name, data):
    out = tmp_path / name
    argv = experiment(name, corpus_data, data, tasks="sst2", model="tiny", budget_minutes="0.03", finetune_minutes="0.05")
    argv += cli_args(finetune_epochs=1, seeds=2, batch_size=8, dtype="fp32", out=out)
    assert cli_main(argv) == 0
    result = json.loads((out / "results.json").read_text())
    assert len(result["scores"]) == 2
    # one precision for every run of the experiment, whatever `auto` would pick on this machine
    ft_configs = list((out / "finetune").glob("*/finetune_config.json"))
    pre_configs = list(out.glob("pretrain*/pretrain_config.json"))
    assert ft_configs and pre_configs
    assert {json.loads(f.read_text())["dtype"] for f in ft_configs + pre_configs} == {"fp32"}
    for variant, per_task in result["scores"].items():
        assert len(per_task["sst2"]) == 2 and all(0.0 <= s <= 1.0 for s in per_task["sst2"]), variant
    md = (out / "results.md").read_text()
    assert "| sst2 |" in md and "+-" in md
    assert (out / "scores.png").stat().st_size > 1000
    if name == "nsp-ablation":  # equal steps for both arms
        steps = [v["steps"] for v in result["pretraining"].values()]
        assert steps[0] == steps[1]
        assert "0.03 min for the first variant (the other gets its step count)" in md
    if name == "mlm-vs-clm":
        # both arms are `pretrain` runs (the clm one a left-to-right BertLMHeadModel) fine-tuned by
        # `finetune`; the clm arm's classifier stays left to right and reads the last token
        clm = json.loads((out / "finetune" / "clm__left-to-right-sst2-0" / "config.json").read_text())
        assert clm["is_decoder"] is True and clm["classifier_pooling"] == "last"
        mlm = json.loads((out / "finetune" / "mlm__bidirectional-sst2-0" / "config.json").read_text())
        assert "is_decoder" not in mlm and "classifier_pooling" not in mlm
        arms = [next((out / d / "checkpoints").iterdir()) for d in ("pretrain-mlm", "pretrain-clm")]
        # a causal LM as transformers names it (the tiny recipe is rotary: RoFormer's name)
        assert json.loads((arms[1] / "config.json").read_text())["architectures"][0] in ("BertLMHeadModel", "RoFormerForCausalLM")
        # both arms reused, with their recorded pretraining
        again = tmp_path / "again"
        assert cli_main(argv[:-1] + [str(again), "--pretrained", *map(str, arms), "--seeds", "1"]) == 0
        reused = json.loads((again / "results.json").read_text())["pretraining"]
        assert [r["causal"] for r in reused.values()] == [False, True]
        assert "val next-token accuracy" in (again / "results.md").read_text()
        assert [r["steps"] for r in reused.values()] == [r["steps"] for r in result["pretraining"].values()]
        assert (again / "pretraining_loss.png").is_file()
    if name == "mlm-vs-rtd":
        # the same minutes for both; the rtd arm is `pretrain --objective electra` with the one-layer
        # full-width generator, and what is fine-tuned is its encoder (the generator stays behind)
        rtd = json.loads((out / "pretrain-rtd" / "pretrain_config.json").read_text())
        mlm = json.loads((out / "pretrain-mlm" / "pretrain_config.json").read_text())
        assert (rtd["objective"], rtd["generator_fraction"], rtd["generator_layers"]) == ("electra", 1.0, 1)
        assert mlm["objective"] == "mlm" and rtd["max_time"] == mlm["max_time"] == 0.03
        rtd_ckpt = next((out / "pretrain-rtd" / "checkpoints").iterdir())
        assert (rtd_ckpt / "generator" / "config.json").is_file()
        assert json.loads((rtd_ckpt / "generator" / "config.json").read_text())["num_hidden_layers"] == 1
        assert "val replaced-token accuracy" in md and "pretraining budget 0.03 min for every variant" in md
        assert list(result["scores"]) == ["mlm (masked LM)", "rtd (ELECTRA)"]
    shutil.rmtree(out)


@pytest.mark.slow
def test_task_adaptive_pretraining_arms(corpus_data, tmp_path):
    """--tapt-steps: the pretrained and the random model each continue the masked LM on the task's
    own training text (labels unused) before fine-tuning; four arms, one TAPT model per task."""
    import random

    rng = random.Random(0)  # 400 varied sentences: enough text for a held-out TAPT sequence
    words = [("the", "a"), ("cat", "dog", "bird"), ("likes", "hears", "sees"), ("the", "a"), ("red", "green"), ("ball", "tree")]
    rows = [(" ".join(rng.choice(w) for w in words) + " .", rng.randint(0, 1)) for _ in range(400)]
    glue = tmp_path / "glue" / "SST-2"
    glue.mkdir(parents=True)
    for split in ("train", "dev"):
        (glue / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    out = tmp_path / "tapt"
    argv = experiment("pretrain-vs-scratch", corpus_data, tasks_data=glue.parent, tasks="sst2", model="tiny", budget_steps=4)
    argv += cli_args(
        tapt_steps=3, tapt_warmup_steps=1, finetune_minutes="0.05", finetune_epochs=1, seeds=1, batch_size=2, out=out
    )
    assert cli_main(argv) == 0
    result = json.loads((out / "results.json").read_text())
    assert list(result["scores"]) == ["pretrained", "scratch", "pretrained+tapt", "scratch+tapt"]
    text = (out / "tapt" / "sst2" / "text.txt").read_text().splitlines()
    assert text == [s for s, _ in rows]  # every training example's text, in order, labels gone
    for arm, start in (("pretrained", out / "pretrain"), ("scratch", out / "random-init")):
        info = result["tapt"][f"{arm}+tapt"]["sst2"]
        assert info["steps"] == 3 and 0.0 <= info["val"]["val_mlm_acc"] <= 1.0
        run = out / "tapt" / "sst2" / arm
        saved = json.loads((run / "pretrain_config.json").read_text())
        assert saved["max_steps"] == 3 and saved["lr"] == 5e-4 and Path(saved["init_from"]).is_relative_to(start)
        assert next((run / "checkpoints").iterdir()).name == "step-000003"
    md = (out / "results.md").read_text()
    assert "| average: pretrained+tapt - scratch |" in md and "Task-adaptive pretraining: 3 steps" in md
    shutil.rmtree(out)


@pytest.mark.slow
def test_experiment_reuses_finished_runs_in_its_out_dir(corpus_data, tmp_path, capsys):
    """Again into the same --out: each fine-tuning run that finished there with the same config from
    the same model (compared by content) on the same task files is reused, not trained again;
    anything else is trained."""
    out, glue = tmp_path / "resume", tmp_path / "glue"
    shutil.copytree(corpus_data["glue"], glue)  # edited below
    base = experiment("pretrain-vs-scratch", corpus_data, tasks_data=glue, tasks="sst2", model="tiny", budget_steps=2)
    base += cli_args(finetune_minutes="0.05", finetune_epochs=1, batch_size=4, out=out)
    assert cli_main(base + cli_args(seeds=1)) == 0
    first = json.loads((out / "results.json").read_text())["scores"]
    records = {d.name: (d / "experiment_run.json").stat().st_mtime_ns for d in (out / "finetune").iterdir()}
    assert sorted(records) == ["pretrained-sst2-0", "scratch-sst2-0"]
    capsys.readouterr()

    # a second seed, from the same model given by path: seed 0 of both arms is reused
    ckpt = next((out / "pretrain" / "checkpoints").iterdir())
    argv = experiment("pretrain-vs-scratch", corpus_data, None, tasks_data=glue, tasks="sst2", model="tiny", pretrained=ckpt)
    argv += cli_args(finetune_minutes="0.05", finetune_epochs=1, batch_size=4, out=out, seeds=2)
    assert cli_main(argv) == 0
    assert "reusing 2 of 4 fine-tuning runs" in capsys.readouterr().out
    second = json.loads((out / "results.json").read_text())["scores"]
    for arm in ("pretrained", "scratch"):
        assert second[arm]["sst2"][0] == first[arm]["sst2"][0] and len(second[arm]["sst2"]) == 2
        assert (out / "finetune" / f"{arm}-sst2-0" / "experiment_run.json").stat().st_mtime_ns == records[f"{arm}-sst2-0"]

    # a changed setting, a changed model, or --rerun: trained again
    assert cli_main(argv + cli_args(finetune_lr="2e-4", seeds=1)) == 0
    assert "reusing" not in capsys.readouterr().out
    other = tmp_path / "other-model"
    shutil.copytree(ckpt, other)
    weights = bytearray((other / "model.safetensors").read_bytes())
    weights[-1] ^= 1  # one bit of one weight
    (other / "model.safetensors").write_bytes(bytes(weights))
    assert cli_main(argv[:-2] + cli_args(seeds=1, finetune_lr="2e-4", pretrained=other)) == 0
    assert "reusing 1 of 2" in capsys.readouterr().out  # the scratch arm only: a random init of the same config
    assert cli_main(argv + cli_args(rerun=True)) == 0
    assert "reusing" not in capsys.readouterr().out
    assert cli_main(argv) == 0
    assert "reusing 4 of 4" in capsys.readouterr().out
    dev = glue / "SST-2" / "dev.tsv"
    dev.write_text(dev.read_text() + "the cat likes the green ball .\t1\n")  # an edited task file
    assert cli_main(argv) == 0
    assert "reusing" not in capsys.readouterr().out
    assert (out / "finetune" / "scratch-sst2-0" / "experiment_run.json").stat().st_mtime_ns != records["scratch-sst2-0"]


def test_experiment_errors_are_one_line(corpus_data, tmp_path, capsys):
    assert cli_main(experiment("nsp-ablation", corpus_data, tasks="sst2", out=tmp_path / "x")) == 2
    assert "needs NSP-prepared data" in capsys.readouterr().err
    assert cli_main(experiment("mlm-vs-clm", corpus_data, tasks_data=tmp_path / "missing")) == 2
    assert "not a directory of GLUE-style tasks" in capsys.readouterr().err
    assert cli_main(experiment("mlm-vs-clm", corpus_data, tapt_steps=10)) == 2
    assert "--tapt-steps: task-adaptive pretraining is an arm of pretrain-vs-scratch" in capsys.readouterr().err


@pytest.mark.slow
def test_experiment_step_budget_runs_in_parallel_processes(corpus_data, tmp_path, monkeypatch, capsys):
    """--budget-steps gives every arm the same step count; --jobs 2 runs them in two processes."""
    out = tmp_path / "par"
    argv = experiment("nsp-ablation", corpus_data, "nsp", tasks="sst2", model="tiny", budget_steps=3, finetune_minutes="0.05")
    argv += cli_args(finetune_epochs=1, seeds=1, batch_size=8, jobs=2, out=out)
    assert cli_main(argv) == 0
    result = json.loads((out / "results.json").read_text())
    assert [v["steps"] for v in result["pretraining"].values()] == [3, 3]
    assert all(0.0 <= s[0] <= 1.0 for per_task in result["scores"].values() for s in per_task.values())
    logs = sorted(p.name for p in (out / "logs").iterdir())
    assert "pretrain_mlm_nsp.log" in logs and "pretrain_mlm.log" in logs and len(logs) == 4, logs
    assert "done: 3 steps" in (out / "logs" / "pretrain_mlm.log").read_text()
    assert "3 steps of 8 sequences for every variant" in (out / "results.md").read_text()
    # the same fine-tuning again from the two pretrained arms, without pretraining (no --data),
    # on an install without matplotlib: known at the start, the report comes without PNGs
    arms = [next((out / d / "checkpoints").iterdir()) for d in ("pretrain-mlm-nsp", "pretrain-mlm")]
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real_find_spec(name, *a))
    capsys.readouterr()
    again = tmp_path / "again"
    argv = experiment("nsp-ablation", corpus_data, None, pretrained=arms, tasks="sst2", finetune_epochs=1, seeds=1, out=again)
    assert cli_main(argv) == 0
    assert "note: matplotlib is not installed" in capsys.readouterr().out
    assert not (again / "scores.png").exists() and (again / "results.json").is_file()
    md = (again / "results.md").read_text()
    assert "pretrained models given with --pretrained" in md
    assert f"mlm: {arms[1]}, given with --pretrained, 3 steps" in md and "val MLM accuracy" in md  # read back


def test_experiment_rejects_a_bad_step_budget(corpus_data, tmp_path, capsys):
    assert cli_main(experiment("pretrain-vs-scratch", corpus_data, budget_steps=0, out=tmp_path / "x")) == 2
    assert "--budget-steps 0: must be a positive number of steps" in capsys.readouterr().err


def test_experiment_checks_its_inputs_before_pretraining(corpus_data, tmp_path, capsys):
    partial = tmp_path / "glue" / "SST-2"
    partial.mkdir(parents=True)
    shutil.copy(corpus_data["glue"] / "SST-2" / "dev.tsv", partial / "dev.tsv")  # no train.tsv
    assert cli_main(experiment("mlm-vs-clm", corpus_data, tasks_data=tmp_path / "glue", tasks="sst2", out=tmp_path / "x")) == 2
    assert "--tasks sst2:" in capsys.readouterr().err
    assert not (tmp_path / "x" / "pretrain-mlm").exists()  # nothing was pretrained
    base = {"pretrained": tmp_path, "tasks": "sst2", "out": tmp_path / "y"}
    assert cli_main(experiment("mlm-vs-clm", corpus_data, None, **base)) == 2
    assert "--pretrained: mlm-vs-clm takes 2 model dir(s), got 1" in capsys.readouterr().err
    assert cli_main(experiment("pretrain-vs-scratch", corpus_data, None, **base)) == 2
    assert "not a model directory (no config.json)" in capsys.readouterr().err
    assert cli_main(experiment("mlm-vs-clm", corpus_data, tasks_data=tmp_path / "glue", tasks="stsb", out=tmp_path / "z")) == 2
    assert "no directory for task 'stsb'" in capsys.readouterr().err  # regression is fine now; missing files are not


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only")
def test_killing_the_experiment_stops_its_worker_processes(corpus_data, tmp_path):
    out = tmp_path / "killed"
    argv = experiment("nsp-ablation", corpus_data, "nsp", tasks="sst2", model="tiny", budget_steps=1000000, batch_size=2, jobs=2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "clozeformer", *argv, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # both pretraining workers are up and logging
        logs = list((out / "logs").glob("pretrain_*.log")) if (out / "logs").is_dir() else []
        if len(logs) == 2 and all(p.stat().st_size > 0 for p in logs):
            break
        time.sleep(0.2)
    workers = [int(p) for p in children.read_text().split()]
    assert len(workers) >= 2
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)

    def alive(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] not in ("Z", "X")
        except (FileNotFoundError, IndexError):
            return False

    deadline = time.monotonic() + 30
    while any(map(alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(map(alive, workers))
