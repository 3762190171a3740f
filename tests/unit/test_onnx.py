"""ONNX export: dynamic axes, parity with PyTorch in ONNX Runtime, the onnx backend of pipelines
and of the server, and the `export` verb."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from synthetic import save_tiny

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from clozeformer.commands.cli import main as cli_main  # noqa: E402
from clozeformer.infer.onnx_export import ExportWrapper, export_onnx  # noqa: E402
from clozeformer.infer.pipelines import pipeline  # noqa: E402
from clozeformer.modeling.bert import (  # noqa: E402
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from clozeformer.modeling.config import BertConfig  # noqa: E402
from clozeformer.utils.errors import ClozeformerError  # noqa: E402

FIXTURES = Path(__file__).parents[1] / "fixtures"
CLASSES = {
    "BertModel": BertModel,
    "BertForMaskedLM": BertForMaskedLM,
    "BertForPreTraining": BertForPreTraining,
    "BertForSequenceClassification": BertForSequenceClassification,
    "BertForTokenClassification": BertForTokenClassification,
    "BertForQuestionAnswering": BertForQuestionAnswering,
}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, infer_tok) -> dict[str, tuple[Path, dict]]:
    """Every architecture saved and exported once: {name: (directory, export report)}."""
    root = tmp_path_factory.mktemp("onnx_models")
    out = {}
    torch.manual_seed(0)
    for name, cls in CLASSES.items():
        directory = save_tiny(cls, infer_tok, root / name, id2label={0: "O", 1: "B-X", 2: "I-X"})
        out[name] = (directory, export_onnx(directory, directory / "model.onnx"))
    return out


def test_export_parity_report(exported):
    for name, (directory, report) in exported.items():
        assert report["architecture"] == name
        assert (directory / "model.onnx").is_file()
        assert not [p for p in directory.iterdir() if p.name.startswith(".")], "temporary files left behind"
        assert report["max_abs_diff"] and max(report["max_abs_diff"].values()) <= 1e-4, report


@pytest.mark.parametrize("shape", [(1, 3), (5, 40)])
def test_dynamic_axes_match_pytorch(exported, shape):
    """Shapes unlike the traced example (B=2, T=8), with padding, for every architecture."""
    B, T = shape
    g = torch.Generator().manual_seed(B * 100 + T)
    ids = torch.randint(5, 200, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, max(1, T - 2) :] = 0  # pad the last row
    types = torch.zeros(B, T, dtype=torch.long)
    positions = torch.tensor([T - 1, 0])  # flat indices into B*T, for the masked-LM graphs
    for name, (directory, report) in exported.items():
        model = CLASSES[name].from_pretrained(directory).eval()
        session = ort.InferenceSession(str(directory / "model.onnx"), providers=["CPUExecutionProvider"])
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()}
        if "masked_positions" in report["inputs"]:
            feed["masked_positions"] = positions.numpy()
        got = dict(zip(report["outputs"], session.run(report["outputs"], feed)))
        with torch.no_grad():
            ref = model(ids, attention_mask=mask, token_type_ids=types)
        hidden = ref.last_hidden_state
        real = mask.bool()  # padded rows of the hidden states are never read; compare real tokens
        np.testing.assert_allclose(got["last_hidden_state"][real.numpy()], hidden[real].numpy(), atol=1e-4)
        if name in ("BertForMaskedLM", "BertForPreTraining"):
            dense = ref.logits if name == "BertForMaskedLM" else ref.prediction_logits  # (B, T, V)
            want = dense.reshape(-1, dense.shape[-1])[positions]
            np.testing.assert_allclose(got["logits"], want.numpy(), atol=1e-4)
        elif name == "BertForQuestionAnswering":
            np.testing.assert_allclose(got["start_logits"], ref.start_logits.numpy(), atol=1e-4)
            np.testing.assert_allclose(got["end_logits"], ref.end_logits.numpy(), atol=1e-4)
        elif name in ("BertForSequenceClassification", "BertForTokenClassification"):
            np.testing.assert_allclose(got["logits"], ref.logits.numpy(), atol=1e-4)
        else:
            np.testing.assert_allclose(got["pooler_output"], ref.pooler_output.numpy(), atol=1e-4)


def test_pipelines_agree_across_backends(exported):
    cases = {
        "BertForMaskedLM": ("fill-mask", ["The cat sat on the [MASK].", "我昨天去了[MASK][MASK]，买了一件红色的外套。"]),
        "BertForSequenceClassification": ("classify", ["good movie", ("bad", "film was long")]),
        "BertForQuestionAnswering": ("qa", [{"question": "where?", "context": "john lives in paris " * 10}]),
        "BertForTokenClassification": ("ner", ["John Smith lives in Paris."]),
    }
    for name, (task, items) in cases.items():
        directory = exported[name][0]
        kw = {"max_length": 16, "doc_stride": 4, "max_question_length": 4} if task == "qa" else {}
        a = pipeline(task, directory, **kw)(items)
        b = pipeline(task, directory, backend="onnx", **kw)(items)
        assert _rounded(a) == _rounded(b), task
    emb_t = pipeline("embed", exported["BertForMaskedLM"][0]).embed(["the cat", "good movie here"])
    emb_o = pipeline("embed", exported["BertForMaskedLM"][0], backend="onnx").embed(["the cat", "good movie here"])
    np.testing.assert_allclose(emb_t, emb_o, atol=1e-5)


def _rounded(x):
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_rounded(v) for v in x]
    return x


def test_onnx_backend_errors(exported, tmp_path):
    with pytest.raises(ClozeformerError, match="no such ONNX file"):
        pipeline("classify", exported["BertForSequenceClassification"][0], backend="onnx", onnx=tmp_path / "x.onnx")
    with pytest.raises(ClozeformerError, match="exported from a BertForMaskedLM"):
        pipeline(
            "classify",
            exported["BertForSequenceClassification"][0],
            backend="onnx",
            onnx=exported["BertForMaskedLM"][0] / "model.onnx",
        )
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(ClozeformerError, match="not a loadable ONNX model"):
        pipeline("embed", exported["BertModel"][0], backend="onnx", onnx=junk)


def test_export_wrapper_ignores_no_padding_fast_path():
    """The model skips the mask when nothing is padded; the export wrapper must not (tracing)."""
    model = BertForSequenceClassification(BertConfig.preset("tiny", vocab_size=50)).eval()
    ids = torch.randint(1, 50, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    with torch.no_grad():
        logits, hidden = ExportWrapper(model).eval()(ids, mask, torch.zeros_like(ids))
        ref = model(ids, attention_mask=mask)
    torch.testing.assert_close(logits, ref.logits)


def test_export_verb_and_server_onnx_backend(exported, tmp_path, capsys):
    directory = exported["BertForSequenceClassification"][0]
    out = tmp_path / "cls.onnx"
    assert cli_main(["export", "--model", str(directory), "--onnx", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.is_file() and (tmp_path / "cls.onnx.config.json").is_file()
    assert "| logits |" in printed
    assert cli_main(["export", "--model", str(tmp_path / "missing")]) == 2
    assert "no such model directory" in capsys.readouterr().err

    from fastapi.testclient import TestClient

    from clozeformer.infer.server import ServeConfig, build_pipelines, create_app

    cfg = ServeConfig(model=str(directory), backend="onnx", onnx=str(out))
    with TestClient(create_app(build_pipelines(cfg), cfg)) as client:
        info = client.get("/info").json()
        assert info["backend"] == "onnx" and info["tasks"] == ["classify", "embed"]
        got = client.post("/classify", json={"inputs": ["good movie", ["bad", "film"]]}).json()["results"]
        want = pipeline("classify", directory)(["good movie", ("bad", "film")])
        assert [r["label"] for r in got] == [r["label"] for r in want]
        assert got[0]["score"] == pytest.approx(want[0]["score"], abs=1e-5)


def test_int8_export_is_smaller_and_close(exported, capsys):
    """`export --quantize int8`: int8 weights (a quarter of the file), vectors close to PyTorch's, the
    directory's default name model.int8.onnx, and the onnx backend of the pipelines reads it."""
    directory = exported["BertModel"][0]
    assert cli_main(["export", "--model", str(directory), "--quantize", "int8"]) == 0
    assert "mean cosine similarity to PyTorch's" in capsys.readouterr().out
    q = directory / "model.int8.onnx"
    assert q.stat().st_size < 0.4 * (directory / "model.onnx").stat().st_size
    import onnx

    ops = {node.op_type for node in onnx.load(str(q)).graph.node}
    assert "DynamicQuantizeLinear" in ops or "DynamicQuantizeMatMul" in ops or "MatMulInteger" in ops, ops
    texts = ["good movie", "the cat sat on the mat", "john lives in paris"]
    want = pipeline("embed", directory, pooling="mean").embed(texts)
    got = pipeline("embed", directory, pooling="mean", backend="onnx", onnx=q).embed(texts)
    assert (got * want).sum(-1).min() > 0.99 and np.abs(got - want).max() > 1e-6  # close, and really quantized


@pytest.mark.parametrize("cls", [BertForMaskedLM, BertForSequenceClassification])
def test_rotary_export_parity_at_another_length(tmp_path, infer_tok, cls):
    """Rotary tables are computed from the sequence length: traced at 8 tokens, checked at 13."""
    torch.manual_seed(0)
    save_tiny(cls, infer_tok, tmp_path, position_embedding_type="rotary")
    report = export_onnx(tmp_path, tmp_path / "model.onnx")
    assert max(report["max_abs_diff"].values()) <= 1e-4, report
