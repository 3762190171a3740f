"""Load an HF-format BERT directory and run its forward pass, in PyTorch or in ONNX Runtime.

A directory names its class in `config.json` "architectures" (as transformers writes it); the
class decides which tasks it can serve (`TASK_HEADS`). Both runners answer the same four
questions, so the pipelines never know which backend they talk to:

    hidden(batch)               -> (B, T, H)  last hidden states (embeddings)
    mlm_logits(batch, flat_pos) -> (N, V)     vocabulary logits at N chosen positions only
    logits(batch)               -> (B, K) sequence or (B, T, K) token classification
    span_logits(batch)          -> (B, T), (B, T) start / end logits (QA)

Outputs are fp32 CPU tensors whatever the model runs in.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

import torch

from clozeformer.modeling.config import BertConfig
from clozeformer.utils.device import resolve_device
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import check_complete

#: task -> architectures that carry its head. "embed" uses the encoder of any of them.
TASK_HEADS: dict[str, tuple[str, ...]] = {
    "fill-mask": ("BertForPreTraining", "BertForMaskedLM"),
    "classify": ("BertForSequenceClassification",),
    "qa": ("BertForQuestionAnswering",),
    "ner": ("BertForTokenClassification",),
}
TASKS = ("fill-mask", "classify", "embed", "qa", "ner")

#: ONNX graph outputs per architecture (`onnx_export.py` writes them, `OnnxRunner` reads them).
#: Every graph also returns last_hidden_state, so `embed` works on any export. Masked-LM graphs
#: take a fourth input, `masked_positions` (N,) flat indices into B*T, and return logits only
#: there (N, V): the same sparse trick as the PyTorch head, instead of B*T*V dense logits.
ONNX_OUTPUTS: dict[str, tuple[str, ...]] = {
    "BertModel": ("last_hidden_state", "pooler_output"),
    "BertForPreTraining": ("logits", "last_hidden_state"),
    "BertForMaskedLM": ("logits", "last_hidden_state"),
    "BertForSequenceClassification": ("logits", "last_hidden_state"),
    "BertForTokenClassification": ("logits", "last_hidden_state"),
    "BertForQuestionAnswering": ("start_logits", "end_logits", "last_hidden_state"),
    "BertForMultipleChoice": ("last_hidden_state",),
}
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def tasks_for(architecture: str) -> list[str]:
    """Tasks a directory of this architecture can serve, in TASKS order."""
    return [t for t in TASKS if t == "embed" or architecture in TASK_HEADS[t]]


def require_task(task: str, architecture: str, where: str) -> None:
    if task not in TASKS:
        raise ClozeformerError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    if task not in tasks_for(architecture):
        need = " or ".join(TASK_HEADS[task])
        hint = ""
        if task == "fill-mask" and (Path(where) / "generator" / "config.json").is_file():
            hint = f"; this is an ELECTRA encoder: its masked-LM generator is {Path(where) / 'generator'}"
        raise ClozeformerError(
            f"{where}: a {architecture} has no head for {task} (needs a {need} directory); "
            f"it can do: {', '.join(tasks_for(architecture))}{hint}"
        )


def read_architecture(directory: Path) -> tuple[BertConfig, str]:
    """(config, architecture name) of an HF-format directory."""
    from clozeformer.hub import model_dir
    from clozeformer.modeling.bert import MODEL_CLASSES

    directory = model_dir(directory)
    if not directory.is_dir():
        raise ClozeformerError(f"{directory}: expected a model directory (config.json + weights)")
    check_complete(directory)
    config = BertConfig.from_pretrained(directory)
    arch = (config.extra.get("architectures") or ["BertModel"])[0]  # BertConfig checked: a list of names
    if arch not in MODEL_CLASSES:
        raise ClozeformerError(f"{directory / 'config.json'}: architectures {arch!r} is not one of {', '.join(MODEL_CLASSES)}")
    return config, arch


def load_model(directory: Path) -> tuple[BertConfig, str, torch.nn.Module]:
    """(config, architecture, model in eval mode) of an HF-format directory.

    strict_heads: a head missing from the checkpoint would be random init, i.e. garbage
    predictions; a bare BertModel may lack its pooler, which embeddings never use."""
    from clozeformer.modeling.bert import MODEL_CLASSES

    config, arch = read_architecture(directory)
    return config, arch, MODEL_CLASSES[arch].from_pretrained(directory, strict_heads=arch != "BertModel").eval()


def native_bf16(device: torch.device) -> bool:
    """True when the hardware computes bf16 natively (Ampere+ GPUs; CPUs with AVX512-BF16 or AMX)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    return False


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """ "auto" is bf16 only on a GPU with native bf16; CPUs stay fp32 unless asked (and able)."""
    if dtype == "fp32":
        return torch.float32
    if dtype == "bf16":
        if not native_bf16(device):
            raise ClozeformerError(f"--dtype bf16: {device.type} here has no native bf16 support; use fp32")
        return torch.bfloat16
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" and native_bf16(device) else torch.float32
    raise ClozeformerError(f"--dtype {dtype!r}: choose auto, fp32 or bf16")


@dataclass
class Batch:
    """One padded model input; every tensor (B, T) int64 on the CPU. The fields are named as the
    model's (and the ONNX graph's) inputs, so `vars(batch)` is the keyword arguments of a call."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor  # 1 = real token, 0 = padding
    token_type_ids: torch.Tensor


class Runner(ABC):
    """What the pipelines need from a backend (see module docstring)."""

    backend: str = ""
    source: str = ""  # the model directory, when loaded from one
    architecture: str
    config: BertConfig

    @abstractmethod
    def hidden(self, batch: Batch) -> torch.Tensor: ...

    @abstractmethod
    def mlm_logits(self, batch: Batch, flat_positions: torch.Tensor) -> torch.Tensor: ...

    @abstractmethod
    def logits(self, batch: Batch) -> torch.Tensor: ...

    @abstractmethod
    def span_logits(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]: ...

    def describe(self) -> dict:
        return {"backend": self.backend, "architecture": self.architecture}


class TorchRunner(Runner):
    backend = "torch"

    def __init__(self, model: torch.nn.Module, *, device: str | None = None, dtype: str = "auto", compile: bool = False) -> None:
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.config = model.config
        self.architecture = type(model).hf_architecture
        self.model = model.eval().to(self.device, self.dtype)
        self.backbone = getattr(self.model, "bert", self.model)  # the BertModel inside any head class
        self.compiled = compile
        if compile:  # dynamic=True: batches change shape (B and T) with every call; else each would recompile
            self.model, self.backbone = torch.compile(self.model, dynamic=True), torch.compile(self.backbone, dynamic=True)

    def _inputs(self, batch: Batch) -> dict[str, torch.Tensor]:
        return {name: t.to(self.device) for name, t in vars(batch).items()}

    @staticmethod
    def _out(t: torch.Tensor) -> torch.Tensor:
        return t.float().cpu()

    @torch.inference_mode()
    def hidden(self, batch: Batch) -> torch.Tensor:
        return self._out(self.backbone(**self._inputs(batch)).last_hidden_state)  # (B, T, H)

    @torch.inference_mode()
    def mlm_logits(self, batch: Batch, flat_positions: torch.Tensor) -> torch.Tensor:
        h = self.backbone(**self._inputs(batch)).last_hidden_state  # (B, T, H)
        h = h.reshape(-1, h.shape[-1])[flat_positions.to(self.device)]  # (N, H): masked rows only
        return self._out(self.model.mlm(h))  # (N, V)

    @torch.inference_mode()
    def logits(self, batch: Batch) -> torch.Tensor:
        return self._out(self.model(**self._inputs(batch)).logits)

    @torch.inference_mode()
    def span_logits(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model(**self._inputs(batch))
        return self._out(out.start_logits), self._out(out.end_logits)

    def describe(self) -> dict:
        dtype = str(self.dtype).removeprefix("torch.")
        return {**super().describe(), "device": str(self.device), "dtype": dtype, "compiled": self.compiled}


class OnnxRunner(Runner):
    """An exported graph (see onnx_export.py) in ONNX Runtime, CPU provider."""

    backend = "onnx"

    def __init__(self, path: str | Path, config: BertConfig, architecture: str, threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise ClozeformerError("the ONNX backend needs onnxruntime (pip install 'clozeformer[onnx]')") from None
        path = Path(path)
        if not path.is_file():
            raise ClozeformerError(f"{path}: no such ONNX file (make one with `clozeformer export --onnx {path}`)")
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own Fail/InvalidGraph types
            raise ClozeformerError(f"{path}: not a loadable ONNX model ({str(e).splitlines()[0]})") from None
        meta = self.session.get_modelmeta().custom_metadata_map
        if meta.get("architecture", architecture) != architecture:
            raise ClozeformerError(
                f"{path}: exported from a {meta['architecture']}, but the model directory "
                f"holds a {architecture}; export this directory again"
            )
        self.path, self.config, self.architecture = path, config, architecture
        self.input_names = {i.name for i in self.session.get_inputs()}
        outputs = {o.name for o in self.session.get_outputs()}
        missing = [n for n in ONNX_OUTPUTS[architecture] if n not in outputs]
        if missing:
            raise ClozeformerError(f"{path}: graph lacks output(s) {', '.join(missing)}")

    def _run(self, batch: Batch, names: list[str], flat_positions: torch.Tensor | None = None) -> list[torch.Tensor]:
        feed = {name: t.numpy() for name, t in vars(batch).items()}
        if "masked_positions" in self.input_names:  # (N,) flat indices into B*T; none when only states are asked for
            feed["masked_positions"] = (torch.zeros(0, dtype=torch.long) if flat_positions is None else flat_positions).numpy()
        return [torch.from_numpy(a).float() for a in self.session.run(names, feed)]

    def hidden(self, batch: Batch) -> torch.Tensor:
        return self._run(batch, ["last_hidden_state"])[0]

    def mlm_logits(self, batch: Batch, flat_positions: torch.Tensor) -> torch.Tensor:
        return self._run(batch, ["logits"], flat_positions)[0]

    def logits(self, batch: Batch) -> torch.Tensor:
        return self._run(batch, ["logits"])[0]

    def span_logits(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        start, end = self._run(batch, ["start_logits", "end_logits"])
        return start, end

    def describe(self) -> dict:
        return {**super().describe(), "onnx": str(self.path)}


def label_names(config: BertConfig) -> list[str]:
    """Label i's name: id2label when the directory has one, else LABEL_i (as transformers names them)."""
    id2label = config.id2label or {}
    return [id2label.get(i, f"LABEL_{i}") for i in range(config.num_labels)]
