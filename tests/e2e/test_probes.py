"""Smoke tests: the probe scripts in tools/probes (runs 14-16 of docs/EXPERIMENTS.md) run end
to end on a tiny model and the GLUE fixtures, so the commands that document those runs keep
working when the package they import changes. The numbers need the real data; these tests check
that each script prints its result lines with well-formed scores."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from safetensors import safe_open
from synthetic import REPO, make_data_dir, run_script, save_tiny

from clozeformer.modeling.bert import BertModel

GLUE = Path(__file__).parents[1] / "fixtures" / "task_glue"

pytestmark = pytest.mark.e2e


def run_probe(name: str, *args: str, env: dict | None = None) -> str:
    return run_script(REPO / "tools" / "probes" / name, *args, env=env)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, infer_tok) -> Path:
    return save_tiny(BertModel, infer_tok, tmp_path_factory.mktemp("probe") / "tiny", position_embedding_type="rotary")


@pytest.mark.parametrize("probe", ["preln,geglu", "nobias"])
def test_run14_modern_probe_pretrains_the_patched_encoder(tmp_path, probe):
    data = make_data_dir(tmp_path, n_docs=120, fixed_vocab=True)
    out = tmp_path / "run"
    flags = ["--data", str(data), "--model", "tiny", "--out", str(out), "--max-steps", "3", "--batch-size", "4", "--no-progress"]
    log = run_probe("run14_modern_probe.py", "pretrain", *flags, "--report-to", "none", env={"PROBE": probe})
    assert f"probe: {sorted(probe.split(','))}" in log
    with safe_open(str(next(out.glob("checkpoints/step-*")) / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
    biases = [k for k in keys if k.endswith(".bias")]
    if probe == "nobias":  # only the MLM decoder's output bias is left
        assert len(biases) == 1 and "predictions" in biases[0], biases
    else:
        assert any("final_norm" in k for k in keys), "pre-LN's final LayerNorm is not in the checkpoint"
        assert len(biases) > 10


def test_run15_biencoder_probe_prints_baseline_and_scores(model_dir):
    log = run_probe("run15_biencoder_probe.py", str(GLUE / "STS-B"), str(model_dir), "--epochs", "1", "--seeds", "2")
    assert re.search(r"word-overlap \(Jaccard\) baseline, no model: dev Spearman -?\d\.\d{3}", log), log
    m = re.search(r"zero-shot (\S+); fine-tuned (\S+) \+- (\S+) \((\S+), (\S+)\)", log)
    assert m, log
    assert all(-1.0 <= float(v) <= 1.0 for v in m.groups())


@pytest.mark.parametrize("task,mode", [("rte", "sep"), ("mrpc", "pair"), ("stsb", "mean")])
def test_run16_pair_features_probe_trains_each_pooling(model_dir, task, mode):
    log = run_probe("run16_pair_features_probe.py", str(GLUE), task, mode, str(model_dir), "0", "--epochs", "2")
    m = re.search(rf"{task} {mode} \S+ seed 0: best (\S+) \(per epoch: (\S+), (\S+)\)", log)
    assert m, log
    best, *epochs = map(float, m.groups())
    assert best == max(epochs) and all(math.isfinite(s) and -1.0 <= s <= 1.0 for s in epochs)


def test_run16_mixing_is_near_one_for_a_random_model(model_dir):
    # a freshly initialised encoder's attention adds little to each token's own state (run 16
    # measured 0.9990 for the random `tiny`), so A's mean barely changes when B is visible; but
    # it changes: 1.0000 would mean the block-diagonal mask let A see B (or full attention did not)
    log = run_probe("run16_pair_features_probe.py", str(GLUE), "stsb", "pair", str(model_dir), "0", "--mixing")
    m = re.search(r"cos\(u with full attention, u with A alone\) (\S+)", log)
    assert m, log
    assert 0.95 < float(m.group(1)) < 0.99995
