"""Export a BERT directory to ONNX with dynamic batch and sequence axes; check it against PyTorch.

    clozeformer export --model DIR --onnx DIR/model.onnx      # then: serve --backend onnx

Exporter: torch's TorchScript-based exporter (`dynamo=False`). It needs nothing beyond torch
and onnx; the newer dynamo exporter also needs `onnxscript`, which clozeformer does not
require. The graph's inputs are input_ids, attention_mask, token_type_ids (int64, (B, T));
masked-LM graphs also take masked_positions (N,) flat indices into B*T and return logits only
there (see `runners.ONNX_OUTPUTS`). Every graph also returns last_hidden_state.

Parity: before the file is put in place, ONNX Runtime runs a batch of a different shape than
the traced example (with padding) and every output must match PyTorch within `atol` (1e-4);
otherwise nothing is written.

`--quantize int8` then writes the graph with int8 weights (ONNX Runtime's dynamic quantization:
per-channel weights, activations quantized per batch; `reduce_range` keeps the 7-bit weight range
that avoids saturating AVX2 integer kernels): a quarter of the size and, on this project's CPUs,
1.5-2x the fp32 graph's speed (BENCHMARKS.md). Its outputs are not within 1e-4 of PyTorch; the
export reports the largest difference and refuses a graph whose hidden states' cosine to
PyTorch's falls below 0.95 (a sanity check on random tokens, where int8 scores about 0.99; on text the
sentence vectors differ far less). The accuracy cost, measured: STS-B and SST-2 in BENCHMARKS.md.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from clozeformer import __version__
from clozeformer.infer.backends import ONNX_INPUTS, ONNX_OUTPUTS, load_model
from clozeformer.utils.configs import save_config
from clozeformer.utils.errors import ClozeformerError

MLM_ARCHITECTURES = ("BertForPreTraining", "BertForMaskedLM")


class ExportWrapper(nn.Module):
    """The exported computation: the model's own modules, with named outputs per architecture."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.architecture = type(model).hf_architecture
        self.backbone = getattr(model, "bert", model)

    def forward(self, input_ids, attention_mask, token_type_ids, masked_positions=None):
        b = self.backbone
        x = b.embeddings(input_ids, token_type_ids)  # (B, T, H)
        # ALWAYS pass the padding mask. The model drops it when nothing is padded (a Python
        # branch on the data), and tracing would freeze whichever branch the example took.
        x = b.encoder(x, attention_mask.bool()[:, None, None, :])
        arch, m = self.architecture, self.model
        if arch == "BertModel":
            return x, b.pooler(x, attention_mask)
        if arch in MLM_ARCHITECTURES:
            rows = x.reshape(-1, x.shape[-1])[masked_positions]  # (N, H)
            return m.mlm(rows), x  # (N, V)
        if arch == "BertForSequenceClassification":
            return m.classifier(b.pooler(x, attention_mask)), x  # (B, K); dropout is the identity in eval
        if arch == "BertForTokenClassification":
            return m.classifier(x), x  # (B, T, K)
        if arch == "BertForQuestionAnswering":
            logits = m.qa_outputs(x)  # (B, T, 2)
            return logits[..., 0], logits[..., 1], x
        return (x,)  # BertForMultipleChoice: the encoder only (embeddings)


def _dynamic_axes(names: list[str], arch: str) -> dict[str, dict[int, str]]:
    """The dynamic axes of the graph's inputs and outputs `names`: (B, T) unless the name says otherwise."""
    bt, b, masked = {0: "batch", 1: "sequence"}, {0: "batch"}, {0: "masked"}
    logits = {"BertForSequenceClassification": b, "BertForTokenClassification": bt}.get(arch, masked)  # else masked-LM
    special = {"pooler_output": b, "masked_positions": masked, "logits": logits}
    return {name: special.get(name, bt) for name in names}


def sample_inputs(config, batch: int, length: int, seed: int) -> dict[str, torch.Tensor]:
    """A padded batch: row b has length - b real tokens (at least 2); MLM positions in real tokens."""
    g = torch.Generator().manual_seed(seed)
    real = torch.tensor([max(2, length - b) for b in range(batch)])  # (B,) real tokens per row
    mask = (torch.arange(length) < real[:, None]).long()  # (B, T)
    ids = torch.randint(1, config.vocab_size, (batch, length), generator=g) * mask
    types = (torch.arange(length) >= length // 2).long() * mask  # second half is segment B
    positions = torch.tensor([b * length + 1 for b in range(batch)] + [length - 1])  # (N,): row 0 is unpadded
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "masked_positions": positions}


def quantize_int8(src: Path, dst: Path) -> None:
    """`src` (an fp32 graph) -> `dst` with int8 weights, activations quantized on the fly."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice to pre-process (shape inference) first
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)


def export_onnx(
    model_dir: str | Path, out: str | Path, *, opset: int = 17, check: bool = True, atol: float = 1e-4, quantize: str = "none"
) -> dict:
    """Write `out` (atomically) and return {"architecture", "outputs", "max_abs_diff": {output: diff}}
    (quantized: also "cosine", the hidden states' mean cosine similarity to PyTorch's)."""
    import onnx

    from clozeformer.hub import model_dir as resolve
    from clozeformer.utils.io import atomic_path

    model_dir, out = resolve(model_dir), Path(out)
    config, arch, model = load_model(model_dir)
    wrapper = ExportWrapper(model).eval()
    inputs = list(ONNX_INPUTS) + (["masked_positions"] if arch in MLM_ARCHITECTURES else [])
    outputs = list(ONNX_OUTPUTS[arch])
    example = sample_inputs(config, batch=2, length=8, seed=0)
    report: dict = {"architecture": arch, "inputs": inputs, "outputs": outputs, "opset": opset, "max_abs_diff": {}}
    with atomic_path(out) as tmp:
        with warnings.catch_warnings():
            # The legacy exporter announces its deprecation, and the tracer warns about the
            # model's Python-level length check (a constant in the graph, which is correct).
            warnings.simplefilter("ignore", category=DeprecationWarning)
            warnings.simplefilter("ignore", category=torch.jit.TracerWarning)
            torch.onnx.export(
                wrapper,
                tuple(example[k] for k in inputs),
                str(tmp),
                dynamo=False,
                input_names=inputs,
                output_names=outputs,
                dynamic_axes=_dynamic_axes(inputs + outputs, arch),
                opset_version=opset,
                do_constant_folding=True,
            )
        graph = onnx.load(str(tmp))
        meta = {"architecture": arch, "clozeformer": __version__, "max_position_embeddings": str(config.max_position_embeddings)}
        for key, value in meta.items():
            graph.metadata_props.add(key=key, value=value)
        onnx.save(graph, str(tmp))
        if check:
            report["max_abs_diff"] = check_parity(wrapper, tmp, config, inputs, outputs)
            worst = max(report["max_abs_diff"].values())
            if worst > atol:
                raise ClozeformerError(f"{out}: ONNX output differs from PyTorch by {worst:.2e} > {atol:g}; not written")
        if quantize == "int8":
            fp32 = tmp.with_name(tmp.name + ".fp32")
            tmp.replace(fp32)
            try:
                quantize_int8(fp32, tmp)
            finally:
                fp32.unlink()
            if check:
                report["max_abs_diff"] = check_parity(wrapper, tmp, config, inputs, outputs)
                report["cosine"] = cosine = hidden_cosine(wrapper, tmp, config, inputs, outputs)
                if cosine < 0.95:
                    raise ClozeformerError(
                        f"{out}: int8 hidden states' cosine to PyTorch's is {cosine:.4f} < 0.95 (broken); not written"
                    )
    report["path"] = str(out)
    return report


def _run_both(wrapper: nn.Module, path: Path, config, inputs: list[str], outputs: list[str]):
    """(ONNX outputs, PyTorch outputs) on a batch shaped unlike the traced example, and its mask."""
    import onnxruntime as ort

    sample = sample_inputs(config, batch=3, length=13, seed=1)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(outputs, {k: sample[k].numpy() for k in inputs})
    with torch.inference_mode():
        want = [w.numpy() for w in wrapper(*(sample[k] for k in inputs))]
    return got, want, sample["attention_mask"].numpy().astype(bool)


def check_parity(wrapper: nn.Module, path: Path, config, inputs: list[str], outputs: list[str]) -> dict[str, float]:
    """Max |ONNX - PyTorch| per output on a batch shaped unlike the traced example."""
    got, want, _ = _run_both(wrapper, path, config, inputs, outputs)
    return {name: float(np.abs(g - w).max()) for name, g, w in zip(outputs, got, want)}


def hidden_cosine(wrapper: nn.Module, path: Path, config, inputs: list[str], outputs: list[str]) -> float:
    """Mean cosine similarity of the real tokens' last hidden states, ONNX against PyTorch."""
    got, want, mask = _run_both(wrapper, path, config, inputs, outputs)
    i = outputs.index("last_hidden_state")
    got, want = got[i][mask], want[i][mask]  # (real tokens, H)
    return float(((got * want).sum(-1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(want, axis=-1))).mean())


# ----------------------------------------------------------------------------- `export` verb


@dataclass
class ExportConfig:
    model: str = field(default="", metadata={"help": "model directory to export", "required": True})
    onnx: str | None = field(default=None, metadata={"help": "output file (default: MODEL/model.onnx)"})
    opset: int = field(default=17, metadata={"help": "ONNX opset version"})
    check: bool = field(default=True, metadata={"help": "compare with PyTorch in ONNX Runtime before writing"})
    atol: float = field(default=1e-4, metadata={"help": "largest allowed |ONNX - PyTorch| difference (fp32)"})
    quantize: Literal["none", "int8"] = field(
        default="none",
        metadata={
            "help": "int8: int8 weights (ONNX Runtime dynamic quantization) for fast CPU serving; default file model.int8.onnx"
        },
    )

    def __post_init__(self) -> None:
        if not self.model:
            raise ClozeformerError("--model DIR is required")
        if self.onnx is None:
            self.onnx = str(Path(self.model) / ("model.onnx" if self.quantize == "none" else f"model.{self.quantize}.onnx"))
        from clozeformer.utils.io import check_output_file

        check_output_file(self.onnx, "--onnx")


CONFIG, SHOW_CONFIG = ExportConfig, True


def main(cfg: ExportConfig) -> int:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        raise ClozeformerError("export needs onnx and onnxruntime (pip install 'clozeformer[onnx]')") from None
    report = export_onnx(cfg.model, cfg.onnx, opset=cfg.opset, check=cfg.check, atol=cfg.atol, quantize=cfg.quantize)
    save_config(cfg, str(cfg.onnx) + ".config.json")
    print(
        f"wrote {report['path']} ({report['architecture']}; inputs {', '.join(report['inputs'])}; "
        f"outputs {', '.join(report['outputs'])})"
    )
    if cfg.check:
        print("| output | max abs diff vs PyTorch |\n|---|---|")
        for name, diff in report["max_abs_diff"].items():
            print(f"| {name} | {diff:.2e} |")
        if "cosine" in report:
            print(f"int8: the hidden states' mean cosine similarity to PyTorch's is {report['cosine']:.5f}")
    sys.stdout.flush()
    return 0
