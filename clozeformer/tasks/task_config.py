"""Typed configs of `clozeformer finetune / evaluate / predict`; the CLI flags mirror the fields.

`TaskDataConfig` holds what every verb needs to read and encode a task's data;
`FinetuneConfig` adds the training recipe, whose defaults are the BERT paper's fine-tuning
recipe (Devlin et al. 2019, A.3: Adam with lr in {2e-5, 3e-5, 5e-5}, batch 32, 3 epochs,
linear warmup then linear decay, dropout 0.1) with warmup over the first 10% of the steps
(as in Google's `run_classifier.py`). The one exception is the learning rate of small models:
unset, it is 5e-4 for `tiny` and `mini` (`default_finetune_lr`), which need a far higher rate
than BERT-base.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from clozeformer.modeling.config import Pooling
from clozeformer.train.tracking import REPORT_TO_HELP, resolve_report_to
from clozeformer.utils.configs import SEED_RANGE, check_ranges, flag_help
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import check_dir_path

#: models up to this hidden size (tiny: 128, mini: 256) fine-tune at SMALL_MODEL_LR when --lr is unset
SMALL_HIDDEN = 256
SMALL_MODEL_LR = 5e-4
BERT_LR = 3e-5


def default_finetune_lr(hidden_size: int) -> float:
    """`finetune --lr` when unset. Small models: 5e-4. Against 2e-4 and 1e-4 on SST-2, CoLA, MRPC,
    STS-B and RTE, it gave `tiny`'s pretrained models their best scores (docs/EXPERIMENTS.md, runs 4
    and 6), and `mini` the same scores as 2e-4 over two pretraining seeds (runs 11-12). Larger
    models: BERT's 3e-5."""
    return SMALL_MODEL_LR if hidden_size <= SMALL_HIDDEN else BERT_LR


def _require(*checks: tuple[bool, str]) -> None:
    """Raise the message of the first failed (ok, message) check."""
    for ok, msg in checks:
        if not ok:
            raise ClozeformerError(msg)


@dataclass
class TaskDataConfig:
    task: str | None = field(
        default=None,
        metadata=flag_help(
            "(required by finetune; evaluate and predict take the model's) GLUE: cola sst2 mrpc stsb qqp mnli qnli "
            "rte wnli; squad squad_v2 xquad cmrc2018 conll2003 swag chnsenticorp; your data: classification "
            "pair-classification regression token-classification qa sentence-embedding"
        ),
    )
    data: list[str] = field(
        default_factory=list,
        metadata=flag_help(
            "a directory with the task's standard file names (train.tsv, dev.tsv, ...), and/or files as "
            "SPLIT=FILE (train=a.csv dev=b.csv) or bare FILEs taken in split order, or hf:NAME[:CONFIG]",
            required=True,
        ),
    )
    max_length: int | None = field(
        default=None,
        metadata=flag_help(
            "tokens per input incl. [CLS]/[SEP] (default: 128; 384 for QA; 256 for sentence-embedding)",
            aliases=("max_seq_len",),
            min=8,
        ),
    )
    text_column: str | None = field(
        default=None, metadata=flag_help("your data: the text column (QA: the question); default text/sentence/...")
    )
    text_pair_column: str | None = field(
        default=None, metadata=flag_help("your data: the second text of a pair (QA: the context)")
    )
    label_column: str | None = field(
        default=None,
        metadata=flag_help(
            "your data: the label column (token classification: the tags; QA: the answer; sentence-embedding: the score)"
        ),
    )
    negative_column: str | None = field(
        default=None, metadata=flag_help("sentence-embedding: a hard negative per row (triplets); default negative/hard_negative")
    )
    answer_start_column: str | None = field(
        default=None, metadata=flag_help("your QA data: the answer's character offset (default: first occurrence of the answer)")
    )
    id_column: str | None = field(default=None, metadata=flag_help("your data: a column of example ids"))
    doc_stride: int = field(default=128, metadata=flag_help("QA: context tokens shared by neighbouring windows", min=0))
    max_question_length: int = field(
        default=64, metadata=flag_help("QA: questions are cut to this many tokens", min=1, aliases=("max_query_len",))
    )
    max_answer_length: int = field(
        default=30, metadata=flag_help("QA: longest answer span, in tokens", min=1, aliases=("max_answer_len",))
    )
    n_best: int = field(default=20, metadata=flag_help("QA: start/end candidates per window; n-best list size", min=1))
    null_threshold: float = field(
        default=0.0, metadata=flag_help("SQuAD v2.0: answer empty when null score - best span score > this")
    )
    eval_batch_size: int = field(default=64, metadata=flag_help("batch size for evaluation and prediction", min=1))
    max_eval_examples: int | None = field(
        default=None, metadata=flag_help("use only the first N examples of each dev/test file (quick runs)", min=1)
    )
    device: str = field(default="auto", metadata=flag_help("auto (cuda if available), cpu, cuda, cuda:1, ..."))
    threads: int | None = field(default=None, metadata=flag_help("torch CPU threads (default: torch's choice)", min=1))
    skip_bad_rows: bool = field(
        default=False,
        metadata=flag_help("skip malformed rows (wrong field count, non-text values), counted and reported, instead of stopping"),
    )

    def __post_init__(self) -> None:
        self.validate()  # a config that exists is a valid one (subclasses extend `validate`)

    def validate(self) -> None:
        check_ranges(self)


@dataclass
class FinetuneConfig(TaskDataConfig):
    model: str | None = field(
        default=None,
        metadata=flag_help(
            "an HF-format BERT directory (config.json + weights + vocab.txt) or Hub id, or a preset "
            "tiny|mini|small|medium|base|large for random init (needs --tokenizer)",
            required=True,
        ),
    )
    tokenizer: str | None = field(
        default=None, metadata=flag_help("directory or vocab.txt of the tokenizer (default: the model directory)")
    )
    out: str | None = field(default=None, metadata=flag_help("output directory for the fine-tuned model", required=True))
    epochs: float = field(default=3.0, metadata=flag_help("passes over the training data (fractions allowed)"))
    lr: float | None = field(default=None, metadata=flag_help("peak learning rate; unset: 5e-4 to hidden size 256, else 3e-5"))
    batch_size: int = field(default=32, metadata=flag_help("training batch size", min=1))
    warmup_ratio: float = field(default=0.1, metadata=flag_help("fraction of steps with linear LR warmup"))
    weight_decay: float = field(default=0.01, metadata=flag_help("AdamW weight decay (not on biases/LayerNorm)", min=0))
    adam_eps: float = field(default=1e-6, metadata=flag_help("AdamW epsilon (BERT: 1e-6)"))
    max_grad_norm: float = field(default=1.0, metadata=flag_help("gradient clipping norm (0 = off)", min=0))
    seed: int = field(default=42, metadata=flag_help("seed for init of new heads, shuffling and dropout", **SEED_RANGE))
    max_train_examples: int | None = field(
        default=None, metadata=flag_help("train on a seeded random subset of N examples (quick runs)", min=1)
    )
    max_time: float | None = field(
        default=None, metadata=flag_help("stop training after this many minutes (then evaluate and save)")
    )
    eval_every: int = field(default=0, metadata=flag_help("also evaluate every N steps (0: once per epoch)", min=0))
    group_by_length: bool | None = field(default=None, metadata=flag_help("group similar lengths (unset: not for embeddings)"))
    save_best: bool = field(default=True, metadata=flag_help("keep the checkpoint with the best dev score (else the last one)"))
    overwrite: bool = field(default=False, metadata=flag_help("allow writing into a non-empty --out"))
    dtype: Literal["auto", "fp32", "bf16", "fp16"] = field(
        default="auto",
        metadata=flag_help(
            "number format (autocast); auto: bf16 on GPUs and AMX CPUs, fp16 on older GPUs, else fp32 (as `pretrain`)",
            aliases=("precision",),
        ),
    )
    dropout: float | None = field(
        default=None,
        metadata=flag_help(
            "hidden and attention dropout while fine-tuning (saved in the model's config); unset: the model's own"
        ),
    )
    pooling: Pooling | None = field(
        default=None,
        metadata=flag_help(
            "sentence vector: cls (BERT), mean or max of the tokens, or the last token. Classification/regression/"
            "multiple-choice heads (other than cls: clozeformer-only, transformers' heads read [CLS]); unset: the "
            "model's own (cls; last for a left-to-right model from `pretrain --objective clm`). sentence-embedding: "
            "unset, a sentence-transformers model's own, else mean"
        ),
    )
    loss: Literal["auto", "cosent", "cosine", "mnrl", "triplet"] = field(
        default="auto",
        metadata=flag_help(
            "sentence-embedding: auto = cosine (MSE of cos vs the score scaled to [0, 1]; measured best) for scored pairs, "
            "mnrl (in-batch negatives) for pairs and triplets; cosent (scored pairs); triplet (margin, for triplets)"
        ),
    )
    scale: float = field(default=20.0, metadata=flag_help("sentence-embedding: cosent/mnrl inverse temperature", min=0))
    margin: float = field(default=0.5, metadata=flag_help("sentence-embedding: triplet loss margin (cosine distance)", min=0))
    symmetric: bool = field(
        default=False, metadata=flag_help("sentence-embedding, mnrl: also rank the anchors for each positive")
    )
    normalize: bool = field(
        default=True, metadata=flag_help("sentence-embedding: unit-length vectors (a Normalize module in the output)")
    )
    report_to: list[str] | None = field(default=None, metadata=flag_help(REPORT_TO_HELP))

    def validate(self) -> None:
        super().validate()
        _require(
            (self.dropout is None or 0 <= self.dropout < 1, f"--dropout must be in [0, 1), got {self.dropout}"),
            (self.epochs > 0, f"--epochs must be > 0, got {self.epochs}"),
            (self.lr is None or self.lr > 0, f"--lr must be > 0, got {self.lr}"),
            (0 <= self.warmup_ratio < 1, f"--warmup-ratio must be in [0, 1), got {self.warmup_ratio}"),
            (self.max_time is None or self.max_time > 0, f"--max-time must be > 0 minutes, got {self.max_time}"),
        )
        self.report_to = resolve_report_to(self.report_to)


@dataclass
class EvaluateConfig(TaskDataConfig):
    model: str | None = field(default=None, metadata=flag_help("a fine-tuned model directory", required=True))
    out: str | None = field(default=None, metadata=flag_help("where to write metrics.json (default: MODEL/eval)"))
    split: str = field(
        default="dev",
        metadata=flag_help("which split to score: dev (MNLI: matched + mismatched), test (when it has labels), or train"),
    )

    def validate(self) -> None:
        super().validate()
        if self.out:
            check_dir_path(self.out)


@dataclass
class PredictConfig(EvaluateConfig):
    out: str | None = field(default=None, metadata=flag_help("where to write the predictions (default: MODEL/predictions)"))
    split: str = field(default="test", metadata=flag_help("which split to predict: test (default), dev or train"))


#: fields a fine-tuned directory remembers (finetune_config.json) and evaluate/predict reuse as defaults
INHERITED_FIELDS = tuple(
    "task max_length text_column text_pair_column label_column negative_column answer_start_column id_column doc_stride "
    "max_question_length max_answer_length n_best null_threshold".split()
)
