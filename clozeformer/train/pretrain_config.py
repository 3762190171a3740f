"""`PretrainConfig`: every knob of a pretraining run, the one place its defaults live.

`clozeformer pretrain` generates one flag per field (`--max-steps`, `--grad-accum`, ...);
`--config run.yaml` (or .json) fills fields from a flat mapping, flags win over the file.
The resolved config is printed at start and saved as RUN_DIR/pretrain_config.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from clozeformer.modeling.config import POSITION_TYPES, PRESETS
from clozeformer.train.core import MAX_BAD_STEPS
from clozeformer.train.tracking import REPORT_TO_HELP, resolve_report_to
from clozeformer.utils.configs import SEED_RANGE, check_ranges, flag_help
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import check_dir_path


@dataclass(frozen=True)
class Recipe:
    """What a run uses for the knobs it leaves unset (None): the measured best for its model size."""

    lr: float
    warmup_steps: int | None  # None: warmup_ratio of the run's steps
    dropout: float | None  # None: the model config's own (0.1 for the presets)
    position_embedding_type: str | None  # None: the model config's own (--model-config / --init-from)
    warmup_ratio: float | None = None
    eval_every: int = 0  # 0: evaluate at the end only


#: Small models trained from scratch on a small budget (docs/EXPERIMENTS.md, run 4, issue 11):
#: rotary positions get the encoder off the unigram plateau in hundreds of steps instead of
#: thousands; a high peak lr with a short warmup and no dropout (as in Cramming, Geiping &
#: Goldstein 2022) use the few steps there are.
SMALL_BUDGET = Recipe(lr=2e-3, warmup_steps=300, dropout=0.0, position_embedding_type="rotary")
#: BERT's own recipe (Devlin et al.): absolute positions, lr 1e-4, the config's dropout, warmup over
#: the first 1% of the steps (BERT: 10,000 of 1,000,000), validation every 2,000 steps. Used for
#: the larger presets and whenever the architecture comes from --model-config or --init-from.
BERT_RECIPE = Recipe(lr=1e-4, warmup_steps=None, dropout=None, position_embedding_type=None, warmup_ratio=0.01, eval_every=2000)
RECIPES: dict[str, Recipe] = {"tiny": SMALL_BUDGET, "mini": SMALL_BUDGET}


def recipe_for(model: str, from_preset: bool) -> Recipe:
    return RECIPES.get(model, replace(BERT_RECIPE, position_embedding_type="absolute")) if from_preset else BERT_RECIPE


@dataclass
class PretrainConfig:
    # ------------------------------------------------------------------ what to train on / where
    data: str | None = field(default=None, metadata=flag_help("prepared data dir (from `clozeformer prepare`)", required=True))
    out: str | None = field(default=None, metadata=flag_help("run dir: config, metrics.jsonl, checkpoints/", required=True))
    # ------------------------------------------------------------------ the model (one of three sources)
    model: str = field(default="tiny", metadata=flag_help("architecture preset", choices=list(PRESETS)))
    model_config: str | None = field(
        default=None, metadata=flag_help("HF-style config.json for the architecture (overrides --model)")
    )
    init_from: str | None = field(
        default=None, metadata=flag_help("start from the weights of this HF-format model dir (continued pretraining)")
    )
    position_embedding_type: Literal["absolute", "rotary"] | None = field(
        default=None,
        metadata=flag_help(
            "absolute (BERT's table) or rotary (RoFormer); unset: the recipe's (rotary for tiny/mini from scratch)",
            choices=list(POSITION_TYPES),
        ),
    )
    dropout: float | None = field(
        default=None, metadata=flag_help("hidden and attention dropout; unset: the recipe's (0 for tiny/mini, else the config's)")
    )
    objective: Literal["mlm", "mlm_nsp", "electra", "clm"] = field(
        default="mlm",
        metadata=flag_help(
            "mlm (RoBERTa-style, saves BertForMaskedLM), mlm_nsp (original BERT, needs NSP-prepared data), "
            "electra (replaced-token detection: a small generator fills the masks, the encoder labels every "
            "token original/replaced; saves the encoder, with the generator in generator/) or clm (the "
            "left-to-right baseline: causal attention, next-token loss at every token, reported as the "
            "mlm_* metrics; saves BertLMHeadModel, whose fine-tuned models stay left-to-right)"
        ),
    )
    generator_fraction: float = field(
        default=0.25, metadata=flag_help("electra: the generator's width as a fraction of the encoder's (same depth)")
    )
    generator_layers: int | None = field(
        default=None,
        metadata=flag_help(
            "electra: the generator's layers (unset: the encoder's); at --generator-fraction 1 the two share embeddings"
        ),
    )
    rtd_weight: float = field(
        default=50.0, metadata=flag_help("electra: weight of the replaced-token loss against the generator's MLM loss")
    )
    # ------------------------------------------------------------------ masking (applied by the loader)
    mlm_probability: float = field(default=0.15, metadata=flag_help("fraction of tokens to predict"))
    masking: Literal["bernoulli", "exact"] = field(
        default="bernoulli",
        metadata=flag_help("bernoulli: each token independently; exact: round(p * length) tokens per sequence"),
    )
    max_predictions: int | None = field(default=20, metadata=flag_help("cap on predicted tokens per sequence"))
    whole_word: bool = field(default=False, metadata=flag_help("mask all pieces of a word together"))
    mask_token_prob: float = field(
        default=0.8,
        metadata=flag_help(
            "of the chosen tokens, the fraction shown as [MASK] (BERT: 0.8; 1 with --random-token-prob 0: [MASK] only)"
        ),
    )
    random_token_prob: float = field(
        default=0.1,
        metadata=flag_help("of the chosen tokens, the fraction shown as a random token (BERT: 0.1; the rest stay unchanged)"),
    )
    # ------------------------------------------------------------------ budget (the first one reached stops)
    max_steps: int | None = field(default=None, metadata=flag_help("optimizer steps"))
    max_tokens: int | None = field(default=None, metadata=flag_help("token positions (global batch x seq_len per step)"))
    max_time: float | None = field(
        default=None, metadata=flag_help("wall-clock minutes of training (evals and checkpoints included)")
    )
    # ------------------------------------------------------------------ batch
    batch_size: int = field(default=32, metadata=flag_help("micro-batch per process", min=1))
    grad_accum: int = field(default=1, metadata=flag_help("micro-batches per optimizer step", min=1))
    batch_ramp_steps: int = field(
        default=0,
        metadata=flag_help(
            "batch ramp (Cramming): over the first N steps the batch grows linearly from 1 to --grad-accum "
            "micro-batches (0 = off)",
            min=0,
        ),
    )
    # ------------------------------------------------------------------ optimizer and schedule
    optimizer: Literal["adamw", "lamb"] = field(
        default="adamw", metadata=flag_help("adamw (default) or lamb (layer-wise trust ratio, for large batches)")
    )
    optimizer_impl: Literal["auto", "fused", "foreach", "for_loop"] = field(
        default="auto", metadata=flag_help("AdamW kernel: auto = fused where torch has it for the device")
    )
    lr: float | None = field(
        default=None, metadata=flag_help("peak learning rate; unset: the recipe's (2e-3 for tiny/mini, else BERT's 1e-4)")
    )
    weight_decay: float = field(default=0.01, metadata=flag_help("decoupled weight decay (not on bias/LayerNorm)"))
    adam_beta1: float = field(default=0.9, metadata=flag_help("first-moment decay"))
    adam_beta2: float = field(default=0.999, metadata=flag_help("second-moment decay"))
    adam_eps: float = field(default=1e-6, metadata=flag_help("denominator epsilon (BERT used 1e-6)"))
    schedule: Literal["linear", "cosine", "constant"] = field(
        default="linear", metadata=flag_help("after warmup: linear decay, cosine decay, or constant")
    )
    warmup_steps: int | None = field(
        default=None,
        metadata=flag_help(
            "linear warmup steps; unset: the recipe's (300 for tiny/mini; else --warmup-ratio of the run, BERT's 1%)", min=0
        ),
    )
    warmup_ratio: float | None = field(default=None, metadata=flag_help("warmup as a fraction of the run's steps (BERT: 0.01)"))
    min_lr_ratio: float = field(default=0.0, metadata=flag_help("lr floor for the decay, as a fraction of --lr"))
    max_grad_norm: float = field(default=1.0, metadata=flag_help("clip the global grad norm (0 = off)"))
    max_bad_steps: int = field(
        default=MAX_BAD_STEPS, metadata=flag_help("stop after this many consecutive steps with a NaN/Inf loss or gradient", min=1)
    )
    # ------------------------------------------------------------------ hardware
    dtype: Literal["auto", "fp32", "bf16", "fp16"] = field(
        default="auto",
        metadata=flag_help(
            "number format (autocast); auto: bf16 on CUDA with bf16 and on AMX CPUs, fp16 + GradScaler on older GPUs, else fp32",
            aliases=("precision",),
        ),
    )
    compile: bool = field(
        default=False, metadata=flag_help("torch.compile the model (for GPUs; on CPU it measured slower for tiny, BENCHMARKS.md)")
    )
    tf32: bool = field(default=True, metadata=flag_help("TF32 matmuls on Ampere+ GPUs"))
    fsdp: bool = field(default=False, metadata=flag_help("shard params/grads/optimizer with FSDP2 instead of DDP"))
    deterministic: bool = field(default=False, metadata=flag_help("torch.use_deterministic_algorithms"))
    threads: int | None = field(default=None, metadata=flag_help("torch CPU threads per process", aliases=("num_threads",)))
    seed: int = field(default=0, metadata=flag_help("seed for init, dropout and data order", **SEED_RANGE))
    # ------------------------------------------------------------------ evaluation, logging, checkpoints
    eval_every: int | None = field(
        default=None,
        metadata=flag_help(
            "evaluate on the val split every N steps (0 = at the end); unset: the recipe's (end for tiny/mini, else 2000)", min=0
        ),
    )
    eval_batches: int | None = field(default=None, metadata=flag_help("cap on val batches per evaluation"))
    log_every: int = field(default=1, metadata=flag_help("write a metrics.jsonl line every N steps", min=1))
    save_every: int = field(default=0, metadata=flag_help("checkpoint every N steps (0 = off)", min=0))
    save_every_minutes: float = field(
        default=30.0, metadata=flag_help("checkpoint every M minutes (0 = off): a crash or SIGKILL loses at most M minutes")
    )
    keep_last: int = field(default=3, metadata=flag_help("checkpoints to keep (the newest K)", min=1))
    resume: bool = field(
        default=True,
        metadata=flag_help("resume from RUN_DIR's newest checkpoint when there is one (--no-resume: refuse a used RUN_DIR)"),
    )
    resume_from: str | None = field(default=None, metadata=flag_help("resume from this checkpoint dir"))
    progress: bool = field(default=True, metadata=flag_help("tqdm progress bar"))
    report_to: list[str] | None = field(default=None, metadata=flag_help(REPORT_TO_HELP))

    def warmup_text(self) -> str:
        return (
            f"{self.warmup_steps} warmup steps"
            if self.warmup_steps is not None
            else f"warmup over {self.warmup_ratio:.0%} of the steps"
        )

    def __post_init__(self) -> None:
        def bad(msg: str) -> ClozeformerError:
            return ClozeformerError(f"pretrain config: {msg}")

        check_ranges(self)
        if not self.data:
            raise bad("--data DATA_DIR is required")
        if not self.out:
            raise bad("--out RUN_DIR is required")
        check_dir_path(self.out)
        if self.model not in PRESETS:
            raise bad(f"unknown --model {self.model!r}; choose one of {', '.join(PRESETS)}")
        if self.model_config and self.init_from:
            raise bad("give --model-config or --init-from, not both")
        if self.position_embedding_type not in (None, *POSITION_TYPES):
            raise bad(
                f"unknown --position-embedding-type {self.position_embedding_type!r}; choose one of {', '.join(POSITION_TYPES)}"
            )
        # The recipe fills what the user left unset; the resolved values are printed and saved.
        recipe = recipe_for(self.model, from_preset=not (self.model_config or self.init_from))
        for name in ("lr", "dropout", "position_embedding_type", "eval_every"):
            if getattr(self, name) is None:
                setattr(self, name, getattr(recipe, name))
        if self.warmup_steps is None and self.warmup_ratio is None:
            self.warmup_steps, self.warmup_ratio = recipe.warmup_steps, recipe.warmup_ratio
        if self.max_steps is None and self.max_tokens is None and self.max_time is None:
            raise bad("set a budget: --max-steps, --max-tokens and/or --max-time")

        def fail_if(broken: bool, name: str, what: str) -> None:
            if broken:
                raise bad(f"--{name.replace('_', '-')} must be {what}, got {getattr(self, name)}")

        for name in ("max_steps", "max_tokens", "max_time"):
            fail_if(getattr(self, name) is not None and getattr(self, name) <= 0, name, "positive")
        fail_if(self.warmup_ratio is not None and not 0.0 <= self.warmup_ratio < 1.0, "warmup_ratio", "in [0, 1)")
        if self.batch_ramp_steps and self.grad_accum < 2:
            raise bad("--batch-ramp-steps grows the micro-batches per step up to --grad-accum; set --grad-accum >= 2")
        fail_if(self.lr <= 0, "lr", "positive")
        fail_if(not 0.0 < self.mlm_probability < 1.0, "mlm_probability", "in (0, 1)")
        p, r = self.mask_token_prob, self.random_token_prob
        if not (0.0 <= p <= 1.0 and 0.0 <= r <= 1.0 and p + r <= 1.0):
            raise bad(f"--mask-token-prob {p} and --random-token-prob {r} must be in [0, 1] and sum to at most 1")
        fail_if(not 0.0 < self.generator_fraction <= 1.0, "generator_fraction", "in (0, 1]")
        fail_if(self.generator_layers is not None and self.generator_layers < 1, "generator_layers", ">= 1")
        fail_if(not self.rtd_weight > 0.0, "rtd_weight", "positive")
        fail_if(self.dropout is not None and not 0.0 <= self.dropout < 1.0, "dropout", "in [0, 1)")
        fail_if(not 0.0 <= self.min_lr_ratio <= 1.0, "min_lr_ratio", "in [0, 1]")
        if self.optimizer == "lamb" and self.optimizer_impl in ("fused", "foreach"):
            raise bad("--optimizer-impl fused/foreach applies to adamw only")
        try:
            self.report_to = resolve_report_to(self.report_to)
        except ClozeformerError as e:
            raise bad(str(e)) from None
