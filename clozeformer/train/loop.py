"""The pretraining loop: `pretrain(cfg)`, single process or under torchrun.

One optimizer step = grad_accum micro-batches on every rank (global batch = batch_size x
grad_accum x world_size); during a batch ramp (--batch-ramp-steps) fewer, as `micro_batches_at`
says. The loss is the mean over ALL masked tokens of the global batch (and over all NSP pairs),
not a mean of per-micro-batch means: each micro-batch's mean is weighted by its share of the
globally counted masked tokens, and multiplied by world_size to undo DDP's / FSDP's gradient
averaging. So 1 process with batch 2b and 2 processes with batch b follow the same trajectory
(tests/test_distributed.py).

A step whose global loss or gradient norm is NaN/Inf makes no update (counted; K in a row
stop the run). Checkpoints: every --save-every steps / --save-every-minutes, at the end, and
after the current step on SIGTERM/SIGINT (a second signal stops at once).
"""

from __future__ import annotations

import functools
import itertools
import math
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from clozeformer import __version__
from clozeformer.data.loader import MaskingConfig, PretrainLoader
from clozeformer.data.manifest import Manifest
from clozeformer.modeling.electra import ElectraForPreTraining
from clozeformer.train import checkpoint as ckpt_io
from clozeformer.train import distributed
from clozeformer.train.build import build_model
from clozeformer.train.checkpoint import preserve_rng
from clozeformer.train.core import Schedule, check_bad_streak, guarded_step, seed_everything
from clozeformer.train.metrics_file import MetricsLog
from clozeformer.train.optim import Budget, build_optimizer, micro_batches_at, optimizer_kernel
from clozeformer.train.precision import enable_tf32, resolve_precision
from clozeformer.train.pretrain_config import PretrainConfig
from clozeformer.train.tracking import Trackers
from clozeformer.utils.configs import config_dict, print_config, save_config
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.progress import progress_bar

#: config fields that may change between a run and its resumption without affecting exactness
#: (tensorboard: the flag --report-to replaced)
RESUME_FREE_FIELDS = set(
    "out resume resume_from progress tensorboard report_to save_every save_every_minutes keep_last eval_every eval_batches "
    "log_every threads max_bad_steps".split()
)


@dataclass
class RunState:
    step: int = 0
    tokens: int = 0
    elapsed_s: float = 0.0  # training wall-clock over all sessions
    bad_total: int = 0
    bad_streak: int = 0
    last_save_s: float = 0.0


@dataclass
class StepResult:
    """One optimizer step: what is logged, and what every rank decided together."""

    record: dict[str, Any]  # loss, mlm_loss, mlm_acc, lr, grad_norm, skipped (+ nsp_*, rtd_*)
    elapsed_s: float  # rank 0's clock
    stop: bool  # a stop signal reached some rank
    save: bool  # a time-based checkpoint is due (rank 0's clock)
    horizon: int | None  # the schedule's step horizon


class Sums:
    """Named float64 accumulators in one tensor, so that a step's statistics and the decisions
    every rank must share cross the ranks in a single all_reduce."""

    def __init__(self, names: tuple[str, ...], device: torch.device) -> None:
        self.index = {n: i for i, n in enumerate(names)}
        self.values = torch.zeros(len(names), dtype=torch.float64, device=device)

    def add(self, name: str, value: torch.Tensor | float) -> None:
        self.values[self.index[name]] += value

    def reduce(self, info) -> dict[str, float]:
        return dict(zip(self.index, distributed.all_reduce(self.values, info).cpu().tolist()))


#: what every objective's forward pass reads from a batch (NSP adds next_sentence_label in training)
MLM_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "labels")
#: validation sums over the whole val split, all ranks
EVAL_SUMS = tuple("mlm_ce mlm_n mlm_correct nsp_ce nsp_n nsp_correct rtd_bce rtd_n rtd_correct rtd_replaced".split())
#: the statistics of a training step (sums over the global batch) and its shared decisions
STEP_SUMS = tuple("mlm_ce mlm_correct nsp_ce nsp_correct rtd_bce rtd_correct elapsed_s stop save".split())


class Trainer:
    def __init__(self, cfg: PretrainConfig, info: distributed.DistInfo):
        self.cfg, self.info = cfg, info
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        if cfg.deterministic:
            torch.use_deterministic_algorithms(True)
        self.run_dir, self.data_dir = Path(cfg.out), Path(cfg.data)
        self.manifest = Manifest.read(self.data_dir)
        self.nsp = cfg.objective == "mlm_nsp"
        self.electra = cfg.objective == "electra"
        self.causal = cfg.objective == "clm"  # next-token labels instead of masking
        if self.nsp and not self.manifest.nsp:
            raise ClozeformerError(
                f"--objective mlm_nsp needs NSP data, but {self.data_dir / 'manifest.json'} "
                f"has mode {self.manifest.mode!r}; prepare it with --mode nsp"
            )
        self.tokenizer_dir = self.data_dir / "tokenizer"
        if not (self.tokenizer_dir / "vocab.txt").is_file():
            raise ClozeformerError(f"{self.tokenizer_dir / 'vocab.txt'}: missing (checkpoints copy it)")
        self.ckpt = self._find_checkpoint()

        seed_everything(cfg.seed)  # identical init on every rank (FSDP does not broadcast)
        model, self.model_source = build_model(cfg, self.manifest, self.data_dir, self.ckpt)
        self.raw = model.to(info.device)
        self.model_cls, self.n_params = type(model), model.num_parameters()
        self.precision = resolve_precision(cfg.dtype, info.device)
        self.tf32 = enable_tf32(cfg.tf32)
        if cfg.fsdp:
            if not info.distributed:
                raise ClozeformerError("--fsdp needs several processes: launch with torchrun --nproc_per_node N")
            distributed.shard_fsdp(self.raw, info)
        self.model = torch.compile(self.raw) if cfg.compile else self.raw
        if info.distributed and not cfg.fsdp:
            self.model = distributed.wrap_ddp(self.model, info)
        self.opt = build_optimizer(self.raw, cfg)
        self.scaler = torch.amp.GradScaler(info.device.type) if self.precision.needs_grad_scaler else None

        same = {k: getattr(cfg, k) for k in ("mlm_probability", "whole_word", "mask_token_prob", "random_token_prob")}
        self.masking = MaskingConfig(strategy=cfg.masking, max_predictions=cfg.max_predictions or self.manifest.seq_len, **same)
        self.loader = self._loader("train")
        self.tokens_per_step = cfg.batch_size * cfg.grad_accum * info.world_size * self.manifest.seq_len
        self.state, self.resume_note = RunState(), None
        torch.manual_seed(cfg.seed + info.rank)  # dropout streams differ per rank
        if self.ckpt is not None:
            self._restore(self.ckpt)
        self.stop_signal = 0

    # ------------------------------------------------------------------ setup helpers
    def _loader(self, split: str) -> PretrainLoader:
        return PretrainLoader(
            self.data_dir,
            split=split,
            batch_size=self.cfg.batch_size,
            seed=self.cfg.seed,
            rank=self.info.rank,
            world_size=self.info.world_size,
            masking=self.masking,
            shuffle=split == "train",
            drop_last=split == "train",
            causal=self.causal,
        )

    def _find_checkpoint(self) -> Path | None:
        cfg = self.cfg
        if self.info.is_main:
            ckpt_io.clean_partial(self.run_dir)  # hidden leftovers of a write that was killed
        distributed.barrier(self.info)
        if cfg.resume_from:
            path = Path(cfg.resume_from)
            ckpt_io.load_trainer_state(path)  # a clear error if it is not a checkpoint
            return path
        latest = ckpt_io.latest_checkpoint(self.run_dir)
        if latest is not None and not cfg.resume:
            raise ClozeformerError(
                f"{self.run_dir} already holds checkpoint {latest.name}; drop --no-resume "
                "to continue that run, or choose a new --out"
            )
        # the newest checkpoint that is whole: a damaged newest one (a disk error, an edit) is
        # reported and the previous one resumed; if none is whole, the newest one's error stops
        first_error = None
        for _, ckpt in reversed(ckpt_io.list_checkpoints(self.run_dir)):
            try:
                ckpt_io.check_resumable(ckpt, self.info.rank)
            except ClozeformerError as e:
                first_error = first_error or e
                if self.info.is_main:
                    print(f"warning: not resuming from {ckpt.name}: {e}", file=sys.stderr, flush=True)
                continue
            if first_error is not None and self.info.is_main:
                print(f"resuming from the previous checkpoint, {ckpt.name}", file=sys.stderr, flush=True)
            return ckpt
        if first_error is not None:
            raise first_error
        return None

    def _restore(self, ckpt: Path) -> None:
        st = ckpt_io.load_trainer_state(ckpt)
        ckpt_io.load_optimizer_state(self.raw, self.opt, ckpt_io.load_optimizer_file(ckpt))
        loaders = st["loader"]
        self.loader.load_state_dict(loaders[self.info.rank] if len(loaders) == self.info.world_size else loaders[0])
        rng = ckpt_io.load_rng(ckpt, self.info.rank)
        if rng is not None:
            ckpt_io.set_rng_state(rng)
        if self.scaler is not None and st.get("grad_scaler"):
            self.scaler.load_state_dict(st["grad_scaler"])
        self.state = RunState(st["step"], st["tokens"], st["elapsed_s"], st.get("bad_steps", 0), 0, st["elapsed_s"])
        now = config_dict(self.cfg)
        changed = {k: (v, now.get(k)) for k, v in st.get("config", {}).items() if k not in RESUME_FREE_FIELDS and now.get(k) != v}
        if len(loaders) != self.info.world_size or rng is None:
            changed["world_size"] = (len(loaders), self.info.world_size)
        self.resume_note = f"resuming from {ckpt} (step {st['step']:,}, {st['tokens']:,} tokens, {st['elapsed_s'] / 60:.1f} min)"
        if changed:
            self.resume_note += "; changed since that run (no longer bit-exact): " + ", ".join(
                f"{k} {a} -> {b}" for k, (a, b) in changed.items()
            )

    def _banner(self) -> None:
        cfg, info = self.cfg, self.info
        print_config(cfg, "PretrainConfig (resolved)")
        save_config(cfg, self.run_dir / "pretrain_config.json")
        c = self.raw.config
        ramp = f" (ramped up from 1 micro-batch over the first {cfg.batch_ramp_steps} steps)" if cfg.batch_ramp_steps else ""
        print(
            f"model: {self.model_cls.__name__} from {self.model_source}: {c.num_hidden_layers} layers, "
            f"hidden {c.hidden_size}, vocab {c.vocab_size}, {self.n_params:,} parameters\n"
            f"data: {self.data_dir} ({self.manifest.mode}, seq_len {self.manifest.seq_len}, "
            f"{self.manifest.num_train:,} train / {self.manifest.num_val:,} val sequences)\n"
            f"batch: {cfg.batch_size} x {cfg.grad_accum} accum x {info.world_size} processes = "
            f"{cfg.batch_size * cfg.grad_accum * info.world_size} sequences, "
            f"{self.tokens_per_step:,} tokens/step{ramp}\n"
            f"device: {info.device}, dtype {self.precision.name}, optimizer {cfg.optimizer} "
            f"({optimizer_kernel(self.opt)}), {'FSDP2' if cfg.fsdp else 'DDP' if info.distributed else 'single'}"
            f"{', compiled' if cfg.compile else ''}{', TF32' if self.tf32 else ''}, "
            f"{torch.get_num_threads()} CPU threads"
        )
        print(self.resume_note or f"new run in {self.run_dir}", flush=True)

    # ------------------------------------------------------------------ one optimizer step
    def train_step(
        self, micro: list[dict[str, torch.Tensor]], elapsed_s: float, sched: Schedule, budget: Budget, save_due: bool
    ) -> StepResult:
        """Forward and backward on each micro-batch, then the update (none on a NaN/Inf loss or
        gradient). The decisions every rank must share ride in the statistics' collective: rank 0's
        clock and time-based save, a stop signal seen by any rank."""
        cfg, info = self.cfg, self.info
        # masked tokens / NSP pairs / real tokens of the whole global batch, counted before any forward pass
        counts = torch.tensor(
            [
                [
                    float((b["labels"] != -100).sum()),
                    float(b["next_sentence_label"].numel()) if self.nsp else 0.0,
                    float(b["attention_mask"].sum()) if self.electra else 0.0,
                ]
                for b in micro
            ],
            dtype=torch.float64,
        )  # (A, 3)
        n_mlm, n_nsp, n_tok = totals = tuple(max(t, 1.0) for t in distributed.all_reduce(counts.sum(0), info).tolist())
        sums = Sums(STEP_SUMS, info.device)
        for i, cpu_batch in enumerate(micro):
            self._forward_backward(cpu_batch, counts[i], totals, sums, last=i == len(micro) - 1)
        if info.is_main:
            sums.add("elapsed_s", elapsed_s)
            sums.add("save", float(save_due))
        sums.add("stop", float(self.stop_signal > 0))
        red = sums.reduce(info)
        loss_value = red["mlm_ce"] / n_mlm + (red["nsp_ce"] / n_nsp if self.nsp else 0.0)
        if self.electra:
            loss_value += self.raw.rtd_weight * red["rtd_bce"] / n_tok
        horizon = budget.horizon(self.state.step, red["elapsed_s"])
        lr = cfg.lr * sched.factor(self.state.step, horizon)
        norm, bad = guarded_step(self.opt, self.scaler, self.raw.parameters(), cfg.max_grad_norm, loss_value, lr)
        rec = dict(
            loss=loss_value,
            mlm_loss=red["mlm_ce"] / n_mlm,
            mlm_acc=red["mlm_correct"] / n_mlm,
            lr=lr,
            grad_norm=norm,
            skipped=bad,
        )
        if self.nsp:
            rec.update(nsp_loss=red["nsp_ce"] / n_nsp, nsp_acc=red["nsp_correct"] / n_nsp)
        if self.electra:
            rec.update(rtd_loss=red["rtd_bce"] / n_tok, rtd_acc=red["rtd_correct"] / n_tok)
        return StepResult(rec, red["elapsed_s"], red["stop"] > 0, red["save"] > 0, horizon)

    def _forward_backward(self, cpu_batch: dict, count: torch.Tensor, totals: tuple, sums: Sums, last: bool) -> None:
        """Forward and backward on one micro-batch, each loss weighted by its share (`count` of `totals`)
        of the global batch's targets, gradients synced on the `last` one; its statistics to `sums`."""
        n_mlm, n_nsp, n_tok = totals
        b = {k: v.to(self.info.device, non_blocking=True) for k, v in cpu_batch.items()}
        n_i = count[0].item()
        inputs = {k: b[k] for k in MLM_INPUTS + (("next_sentence_label",) if self.nsp else ())}
        with distributed.grad_sync(self.model, self.raw, last, self.cfg.fsdp), self.precision.autocast():
            out = self.model(**inputs)
            logits = out.logits  # (N_i, V): masked rows only (the MLM contract, modeling/bert.py)
            mlm_mean = out.mlm_loss if self.nsp or self.electra else out.loss
            # n_i == 0: the mean is NaN; keep the head in the graph with a zero instead
            loss = mlm_mean * (n_i / n_mlm) if n_i else logits.sum() * 0.0
            if self.nsp:
                loss = loss + out.nsp_loss * (count[1].item() / n_nsp)
            if self.electra:  # the replaced-token loss is a mean over every real token
                loss = loss + self.raw.rtd_weight * out.rtd_loss * (count[2].item() / n_tok)
        loss = loss * self.info.world_size  # undo the gradient averaging over ranks
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        with torch.no_grad():
            if n_i:
                sums.add("mlm_ce", mlm_mean.detach().double() * n_i)
                sums.add("mlm_correct", (logits.argmax(-1) == b["labels"][b["labels"] != -100]).sum())
            if self.nsp:
                sums.add("nsp_ce", out.nsp_loss.detach().double() * count[1].item())
                sums.add("nsp_correct", (out.seq_relationship_logits.argmax(-1) == b["next_sentence_label"].view(-1)).sum())
            if self.electra:
                real = b["attention_mask"].bool()
                sums.add("rtd_bce", out.rtd_loss.detach().double() * count[2].item())
                sums.add("rtd_correct", ((out.rtd_logits > 0) == out.rtd_labels.bool())[real].sum())

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, pad_batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """MLM loss / accuracy / perplexity (and NSP accuracy) over the val split, all ranks."""
        if self.manifest.num_val == 0:
            return {}
        cfg, info = self.cfg, self.info
        with preserve_rng():
            self.raw.eval()
            batches = itertools.islice(self._loader("val"), cfg.eval_batches or None)  # lazily: val may be big
            if cfg.fsdp:  # every rank must run the same number of (collective) forward passes
                batches = list(batches)
                most = int(distributed.all_reduce(torch.tensor([float(len(batches))]), info, op="max").item())
                batches += [None] * (most - len(batches))  # None: a forward on pad_batch, not scored
            sums = Sums(EVAL_SUMS, torch.device("cpu"))
            for batch in batches:
                b = {k: v.to(info.device) for k, v in (batch if batch is not None else pad_batch).items()}
                with self.precision.autocast():
                    out = self.raw(**{k: b[k] for k in MLM_INPUTS})
                if batch is None:
                    continue
                logits = out.logits  # (N, V)
                target = b["labels"][b["labels"] != -100]
                sums.add("mlm_ce", torch.nn.functional.cross_entropy(logits.float(), target, reduction="sum").item())
                sums.add("mlm_n", target.numel())
                sums.add("mlm_correct", (logits.argmax(-1) == target).sum().item())
                if self.nsp:  # NSP data trained with --objective mlm has labels but no NSP head
                    nsl = b["next_sentence_label"].view(-1)
                    nsp_logits = out.seq_relationship_logits.float()
                    sums.add("nsp_ce", torch.nn.functional.cross_entropy(nsp_logits, nsl, reduction="sum").item())
                    sums.add("nsp_n", nsl.numel())
                    sums.add("nsp_correct", (nsp_logits.argmax(-1) == nsl).sum().item())
                if self.electra:  # the discriminator on the generator's samples
                    real = b["attention_mask"].bool()
                    sums.add("rtd_n", float(real.sum()))
                    sums.add("rtd_bce", out.rtd_loss.item() * float(real.sum()))
                    sums.add("rtd_correct", ((out.rtd_logits > 0) == out.rtd_labels.bool())[real].sum().item())
                    sums.add("rtd_replaced", out.rtd_labels[real].sum().item())
            s = sums.reduce(info)
            self.raw.train()
        n = max(s["mlm_n"], 1.0)
        rec = {
            "val_mlm_loss": s["mlm_ce"] / n,
            "val_mlm_acc": s["mlm_correct"] / n,
            "val_ppl": math.exp(min(s["mlm_ce"] / n, 50.0)),
            "val_masked_tokens": int(s["mlm_n"]),
        }
        if s["nsp_n"]:
            rec.update(val_nsp_loss=s["nsp_ce"] / s["nsp_n"], val_nsp_acc=s["nsp_correct"] / s["nsp_n"])
        if s["rtd_n"]:  # val_rtd_replaced: the fraction replaced; 1 minus it is what "nothing replaced" scores
            n = s["rtd_n"]
            rec.update(val_rtd_loss=s["rtd_bce"] / n, val_rtd_acc=s["rtd_correct"] / n, val_rtd_replaced=s["rtd_replaced"] / n)
        return rec

    # ------------------------------------------------------------------ checkpoints
    def save(self, reason: str, final: bool = False) -> Path | None:
        """Every rank takes part (state gathering); rank 0 writes. An OSError keeps the old ones."""
        info, st = self.info, self.state
        rng_blobs = distributed.gather_bytes(ckpt_io.rng_bytes(), info)  # first: nothing below may move it
        with preserve_rng():
            if self.cfg.fsdp or info.device.type != "cpu":
                sd = ckpt_io.full_model_state(self.raw)  # collective under FSDP
                model_cls = self.model_cls
                if self.electra:
                    model_cls = functools.partial(
                        ElectraForPreTraining, generator_config=self.raw.generator.config, rtd_weight=self.raw.rtd_weight
                    )

                def write_model(d: Path) -> None:
                    if info.is_main:
                        ckpt_io.model_from_state_dict(model_cls, self.raw.config, sd).save_pretrained(d)
            else:
                write_model = self.raw.save_pretrained
            osd = ckpt_io.full_optimizer_state(self.raw, self.opt)
        loader_states = distributed.gather_json(self.loader.state_dict(), info)
        ok, error = torch.ones(1), ""
        if info.is_main:
            trainer_state = {
                "step": st.step,
                "tokens": st.tokens,
                "elapsed_s": st.elapsed_s,
                "bad_steps": st.bad_total,
                "world_size": info.world_size,
                "reason": reason,
                "loader": loader_states,
                "config": config_dict(self.cfg),
                "grad_scaler": self.scaler.state_dict() if self.scaler else None,
                "clozeformer_version": __version__,
            }
            try:
                ckpt_io.save_checkpoint(
                    self.run_dir,
                    st.step,
                    card=self.card,
                    write_model=write_model,
                    tokenizer_dir=self.tokenizer_dir,
                    optimizer_state=osd,
                    rng_blobs=rng_blobs,
                    trainer_state=trainer_state,
                    keep_last=self.cfg.keep_last,
                )
            except OSError as e:
                prev = ckpt_io.latest_checkpoint(self.run_dir)
                error = f"checkpoint {ckpt_io.checkpoint_name(st.step)} was NOT written ({e}); " + (
                    f"the previous checkpoint {prev} is intact" if prev else "there is no earlier checkpoint"
                )
                tqdm.write(f"warning: {error}", file=sys.stderr)
                self.log.log({"kind": "event", "step": st.step, "event": "checkpoint_failed", "error": str(e)})
                ok[0] = 0.0
        st.last_save_s = st.elapsed_s
        if distributed.all_reduce(ok, info, op="min").item() == 0:  # every rank learns the outcome
            if final:
                raise ClozeformerError(error or "the final checkpoint was not written (see rank 0's log)")
            return None
        return self.run_dir / ckpt_io.CHECKPOINTS / ckpt_io.checkpoint_name(st.step)

    # ------------------------------------------------------------------ the loop
    def _on_signal(self, signum, frame) -> None:
        if self.stop_signal:
            raise KeyboardInterrupt  # second signal: stop now
        self.stop_signal = signum
        tqdm.write(f"received {signal.Signals(signum).name}: checkpointing after this step", file=sys.stderr)

    def _trackers(self, resume_step: int | None) -> Trackers:
        """The --report-to backends (rank 0 reports); every rank learns whether they started."""
        cfg, trackers, error = self.cfg, None, None
        if self.info.is_main:
            try:
                trackers = Trackers(
                    cfg.report_to, self.run_dir, config_dict(cfg), resume_step=resume_step, source="clozeformer pretrain"
                )
            except ClozeformerError as e:
                error = e
        # unconditional: ranks may disagree on an unset --report-to (tensorboard installed on one node only)
        if distributed.all_reduce(torch.tensor([0.0 if error else 1.0]), self.info, op="min").item() == 0:
            raise error or ClozeformerError("rank 0 could not start the --report-to trackers (see its error)")
        return trackers or Trackers([], self.run_dir, {}, enabled=False)

    def run(self) -> dict[str, Any]:
        """Train until the budget is spent or a signal stops the run; returns its summary."""
        cfg, info, st = self.cfg, self.info, self.state
        if info.is_main:
            self._banner()
        max_time_s = cfg.max_time * 60 if cfg.max_time else None
        budget = Budget(cfg.max_steps, cfg.max_tokens, max_time_s, self.tokens_per_step, cfg.grad_accum, cfg.batch_ramp_steps)
        resume_step = st.step if self.ckpt else None
        self.log = MetricsLog(self.run_dir, info.is_main, resume_step, self._trackers(resume_step))
        handlers = {}
        if threading.current_thread() is threading.main_thread():
            handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        bar = progress_bar(
            budget.horizon(st.step, st.elapsed_s), initial=st.step, unit="step", enabled=info.is_main and cfg.progress
        )
        end = None
        try:
            end = self._train(budget, bar)
        finally:
            bar.close()
            self.log.close(failed=end is None)
            for s, h in handlers.items():
                signal.signal(s, h)
        return self._summary(*end)

    def _train(self, budget: Budget, bar: tqdm) -> tuple[str, dict, dict, Path | None]:
        """The steps, evaluations and checkpoints; returns (stopped_by, last train record, last validation, checkpoint)."""
        cfg, st = self.cfg, self.state
        sched = Schedule(cfg.schedule, cfg.warmup_steps or 0, cfg.min_lr_ratio, warmup_ratio=cfg.warmup_ratio or 0.0)
        clock, first_step = (time.monotonic(), st.elapsed_s), st.step  # this session's start, on both clocks
        it, rec, val, stopped_by, last_saved, micro = iter(self.loader), {}, {}, "budget", None, []
        self.raw.train()
        while not budget.done(st.step, st.tokens, st.elapsed_s):
            micro, out, rec = self._take_step(it, sched, budget, clock, bar)
            if cfg.eval_every and st.step % cfg.eval_every == 0:
                val = self._eval_and_log(micro[-1])
            if out.stop:
                stopped_by = signal.Signals(self.stop_signal).name if self.stop_signal else "signal"
                break
            due = (cfg.save_every and st.step % cfg.save_every == 0) or out.save
            # no periodic checkpoint in the middle of a NaN streak: keep the last good one newest;
            # none on the last step either: the final save below labels it with the stop reason
            if due and st.bad_streak == 0 and not budget.done(st.step, st.tokens, st.elapsed_s):
                last_saved = self.save("periodic") or last_saved
        if stopped_by == "budget" and micro and val.get("step") != st.step:
            val = self._eval_and_log(micro[-1])
        if st.step > first_step and (last_saved is None or last_saved.name != ckpt_io.checkpoint_name(st.step)):
            last_saved = self.save(stopped_by, final=True)
        return stopped_by, rec, val, last_saved

    def _take_step(self, it, sched: Schedule, budget: Budget, clock: tuple, bar: tqdm) -> tuple[list, StepResult, dict]:
        """`train_step` on the next micro-batches, then the run state, log and bar; returns (micro, result, record)."""
        cfg, st = self.cfg, self.state
        t0 = time.monotonic()
        micro = [next(it) for _ in range(micro_batches_at(st.step, cfg.grad_accum, cfg.batch_ramp_steps))]
        step_tokens = budget.tokens_in(st.step)
        # every rank uses rank 0's clock (carried by the step's all-reduce): same decisions
        now = clock[1] + time.monotonic() - clock[0]
        save_due = bool(cfg.save_every_minutes) and now - st.last_save_s >= 60 * cfg.save_every_minutes
        out = self.train_step(micro, now, sched, budget, save_due)
        st.step += 1
        st.tokens += step_tokens
        st.elapsed_s = out.elapsed_s
        st.bad_total += out.record["skipped"]
        st.bad_streak = st.bad_streak + 1 if out.record["skipped"] else 0
        rec = {"kind": "train", "step": st.step, **out.record, "tokens": st.tokens, "elapsed_s": round(st.elapsed_s, 3)}
        rec.update(tokens_per_s=step_tokens / max(time.monotonic() - t0, 1e-9), bad_steps=st.bad_total)
        if st.step % cfg.log_every == 0 or out.record["skipped"]:
            self.log.log(rec)
        bar.total = out.horizon
        bar.set_postfix(loss=f"{rec['loss']:.4f}", lr=f"{rec['lr']:.2e}", tok_s=f"{rec['tokens_per_s']:,.0f}", refresh=False)
        bar.update(1)
        if st.bad_streak >= cfg.max_bad_steps:
            last = ckpt_io.latest_checkpoint(self.run_dir)
            advice = f"Last good checkpoint: {last or 'none'}. Try a lower --lr, more --warmup-steps or --dtype fp32"
            check_bad_streak(st.bad_streak, st.step, cfg.max_bad_steps, advice)
        return micro, out, rec

    def _summary(self, stopped_by: str, rec: dict, val: dict, last_saved: Path | None) -> dict[str, Any]:
        """What `pretrain` returns, and its `done:` line on rank 0."""
        st = self.state
        summary = {
            "step": st.step,
            "tokens": st.tokens,
            "elapsed_s": round(st.elapsed_s, 2),
            "stopped_by": stopped_by,
            "bad_steps": st.bad_total,
            "train": rec,
            "val": {k: v for k, v in val.items() if k not in ("kind", "step")},
            "checkpoint": str(last_saved or ckpt_io.latest_checkpoint(self.run_dir)),
        }
        if self.info.is_main:
            print(
                f"done: {st.step:,} steps, {st.tokens:,} tokens, {st.elapsed_s / 60:.1f} min, stopped by {stopped_by}; "
                + (f"val MLM loss {val['val_mlm_loss']:.4f}, acc {val['val_mlm_acc']:.4f}; " if val else "")
                + f"checkpoint {summary['checkpoint']}",
                flush=True,
            )
        return summary

    def card(self, directory: Path) -> str:
        """README.md (model card) of the checkpoint written in `directory`: objective, data, budget
        so far, last validation."""
        from clozeformer.modeling import card

        cfg, st, m = self.cfg, self.state, self.manifest
        val = {k: round(v, 4) for k, v in getattr(self, "last_val", {}).items() if k.startswith("val_")}
        facts = {
            "objective": cfg.objective,
            "initialised from": cfg.init_from or cfg.model_config or f"preset {cfg.model} (random)",
            "pretraining data": f"{cfg.data} ({m.train_tokens:,} training tokens, sequences of {m.seq_len}, "
            f"vocabulary {m.vocab_size:,})",
            "trained": f"{st.step:,} steps, {st.tokens:,} tokens, {st.elapsed_s / 60:.1f} minutes",
            "recipe": f"lr {cfg.lr:g}, {cfg.warmup_text()}, batch {cfg.batch_size} x {cfg.grad_accum} accumulation"
            + (f" (ramped over {cfg.batch_ramp_steps} steps)" if cfg.batch_ramp_steps else ""),
            f"validation at step {getattr(self, 'last_val', {}).get('step')}": val or None,
        }
        return card.render(
            f"{card.architecture_of(directory)} pretrained with clozeformer",
            card.architecture_of(directory),
            facts,
            base_model=cfg.init_from,
            command=card.command_line(),
        )

    def _eval_and_log(self, pad_batch) -> dict[str, Any]:
        rec = self.evaluate(pad_batch)
        if rec:
            rec = {"kind": "eval", "step": self.state.step, **rec}
            self.last_val = rec
            self.log.log(rec)
            if self.info.is_main:
                tqdm.write(
                    f"step {self.state.step}: val MLM loss {rec['val_mlm_loss']:.4f}, "
                    f"acc {rec['val_mlm_acc']:.4f}, ppl {rec['val_ppl']:.2f}"
                    + (f", NSP acc {rec['val_nsp_acc']:.4f}" if "val_nsp_acc" in rec else "")
                    + (f", replaced-token acc {rec['val_rtd_acc']:.4f}" if "val_rtd_acc" in rec else ""),
                    file=sys.stderr,
                )
        return rec


def pretrain(cfg: PretrainConfig) -> dict[str, Any]:
    """Run (or resume) a pretraining run; returns a summary (final step, losses, checkpoint)."""
    info = distributed.setup()
    ok = False
    try:
        summary = Trainer(cfg, info).run()
        ok = True
        return summary
    finally:
        distributed.teardown(barrier=ok)
