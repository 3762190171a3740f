"""Experiment tracking: `--report-to tensorboard,wandb,mlflow` (or `none`), as transformers' Trainer.

`pretrain` and `finetune` always write their own files (metrics.jsonl, metrics.json); `Trackers`
sends the same records to the backends asked for, from the main process only:

    tensorboard  RUN_DIR/tb (torch's SummaryWriter); a resumed run purges the steps after its checkpoint
    wandb        project $WANDB_PROJECT or "clozeformer", run name = RUN_DIR's name, files under
                 $WANDB_DIR or else RUN_DIR/wandb; WANDB_MODE=offline / disabled work as in wandb
    mlflow       $MLFLOW_TRACKING_URI, or else a local file store RUN_DIR/mlruns (no server, and no
                 database package: it works with mlflow-skinny; MLflow 3 keeps file stores behind
                 MLFLOW_ALLOW_FILE_STORE, set to true for them unless set); experiment
                 $MLFLOW_EXPERIMENT_NAME or "clozeformer"

A record {"kind": K, "step": N, name: value, ...} becomes the scalars K/name at step N (nested
dicts as K/outer/inner; strings, None and NaN/Inf are left out). The resolved config is logged
once: wandb's run config, MLflow params (values stringified, cut to MLflow's length limit), a
TensorBoard text. A resumed pretraining run reports into the same wandb and MLflow runs: their
ids are kept in RUN_DIR/tracking.json. Unset, --report-to means tensorboard when it is
installed; a backend asked for by name that is not installed is an error before any work, and
one that cannot start (wandb online without a login, an MLflow server down) stops the run with
one error line; one that fails later warns and the run goes on. The backends are imported only
when a run reports to them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import secrets
import string
import sys
import time
from pathlib import Path
from typing import Any

from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import atomic_write_json

#: backend -> (module it needs, what to pip install)
BACKENDS = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb"), "mlflow": ("mlflow", "mlflow-skinny")}
CHOICES = (*BACKENDS, "none")
#: the wandb / MLflow run ids of a run directory, for resuming into the same runs
STATE_FILE = "tracking.json"
REPORT_TO_HELP = (
    "where to report metrics besides the run's own files: tensorboard, wandb, mlflow or none, comma- or "
    "space-separated (unset: tensorboard when installed)"
)


def installed(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is not None  # None: an import blocked on purpose
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def resolve_report_to(value: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """The backends of --report-to, checked: names split on commas and spaces, in order, once each.

    None (unset) is tensorboard when it is installed, else none. Raises ClozeformerError for an
    unknown name, "none" beside another name, or a named backend whose package is missing.
    """
    if value is None:
        return ["tensorboard"] if installed(BACKENDS["tensorboard"][0]) else []
    items = [value] if isinstance(value, str) else list(value)
    names: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ClozeformerError(f"--report-to: expected names, got {item!r}")
        for name in item.replace(",", " ").split():
            name = name.strip().lower()
            if name not in CHOICES:
                raise ClozeformerError(f"--report-to: unknown {name!r}; choose from {', '.join(CHOICES)}")
            if name not in names:
                names.append(name)
    if "none" in names:
        if len(names) > 1:
            raise ClozeformerError(f"--report-to: 'none' cannot be combined with {', '.join(n for n in names if n != 'none')}")
        return []
    for name in names:
        module, package = BACKENDS[name]
        if not installed(module):
            raise ClozeformerError(f"--report-to {name} needs `{module}` (pip install {package})")
    return names


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The numeric values of a record as {kind/name: float}; step and kind themselves excluded."""
    out: dict[str, float] = {}

    def walk(prefix: str, d: dict[str, Any]) -> None:
        for k, v in d.items():
            if isinstance(v, dict):
                walk(f"{prefix}/{k}", v)
            elif isinstance(v, (int, float)) and math.isfinite(v):
                out[f"{prefix}/{k}"] = float(v)

    walk(str(record.get("kind", "train")), {k: v for k, v in record.items() if k not in ("step", "kind")})
    return out


def flat_params(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A config as flat string params: nested keys joined with '.', lists as JSON."""
    out: dict[str, str] = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_params(v, key + "."))
        else:
            out[key] = json.dumps(v) if isinstance(v, (list, tuple)) else str(v)
    return out


def new_run_id(length: int = 8) -> str:
    """A wandb-style run id: lowercase letters and digits."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(length))


def read_state(run_dir: Path) -> dict[str, Any]:
    try:
        state = json.loads((run_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


class Trackers:
    """The backends of one run. Every method is a no-op on a non-main process (`enabled` False).

    `resume_step`: the checkpoint step a pretraining run resumes from (None: a new run, new
    wandb/MLflow runs). Use `close(failed=...)` (or `with`) so that the runs are finished.
    """

    def __init__(
        self,
        report_to: list[str],
        run_dir: str | os.PathLike,
        config: dict[str, Any],
        *,
        enabled: bool = True,
        resume_step: int | None = None,
        source: str = "clozeformer",
    ) -> None:
        self.report_to = list(report_to) if enabled else []
        self.run_dir = Path(run_dir)
        self.name = self.run_dir.resolve().name
        self.tb = self.wandb = self.mlflow = None
        self.mlflow_run_id: str | None = None
        self.failures: dict[str, int] = {}
        if not self.report_to:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        state = read_state(self.run_dir) if resume_step is not None else {}
        try:
            if "tensorboard" in self.report_to:
                self._start_tensorboard(config, resume_step)
            if "wandb" in self.report_to:
                self._start_wandb(config, state)
            if "mlflow" in self.report_to:
                self._start_mlflow(config, state, resume_step, source)
        except BaseException:
            self.close(failed=True)
            raise
        ids = {"wandb_run_id": getattr(self.wandb, "id", None), "mlflow_run_id": self.mlflow_run_id}
        if self.mlflow is not None:
            ids["mlflow_tracking_uri"] = self.mlflow.tracking_uri
        ids = {k: v for k, v in ids.items() if v}
        if ids:
            atomic_write_json(self.run_dir / STATE_FILE, {**state, **ids})

    # ------------------------------------------------------------------ backends
    def _start_tensorboard(self, config: dict[str, Any], resume_step: int | None) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise ClozeformerError(f"--report-to tensorboard: {e} (pip install tensorboard)") from None
        self.tb = SummaryWriter(str(self.run_dir / "tb"), purge_step=(resume_step or 0) + 1)
        if resume_step is None:
            self.tb.add_text("config", "```\n" + json.dumps(config, indent=2) + "\n```", 0)

    def _start_wandb(self, config: dict[str, Any], state: dict[str, Any]) -> None:
        import wandb

        try:
            self.wandb = wandb.init(
                project=os.environ.get("WANDB_PROJECT") or "clozeformer",
                name=self.name,
                id=state.get("wandb_run_id") or new_run_id(),
                resume="allow",
                config=config,
                allow_val_change=True,
                dir=None if os.environ.get("WANDB_DIR") else str(self.run_dir),  # None: wandb reads $WANDB_DIR
            )
        except Exception as e:  # no API key online, a bad WANDB_MODE, ...
            raise ClozeformerError(f"--report-to wandb: {type(e).__name__}: {str(e).strip().splitlines()[0]}") from None
        self.wandb.define_metric("step")  # records may repeat steps after a resume: chart against "step"
        self.wandb.define_metric("*", step_metric="step", step_sync=True)

    def _start_mlflow(self, config: dict[str, Any], state: dict[str, Any], resume_step: int | None, source: str) -> None:
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI") or (self.run_dir / "mlruns").resolve().as_uri()
        if uri.startswith("file:") or "://" not in uri:
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps its file store behind this
        try:
            client = MlflowClient(uri)
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "clozeformer"
            exp = client.get_experiment_by_name(name)
            try:
                exp_id = exp.experiment_id if exp is not None else client.create_experiment(name)
            except MlflowException:  # created meanwhile by another run
                exp_id = client.get_experiment_by_name(name).experiment_id
            run_id, logged = None, {}
            if state.get("mlflow_run_id") and state.get("mlflow_tracking_uri") == uri:
                try:
                    logged = client.get_run(state["mlflow_run_id"]).data.params
                    run_id = state["mlflow_run_id"]
                    client.update_run(run_id, status="RUNNING")
                except MlflowException:
                    run_id, logged = None, {}  # deleted meanwhile: a new run
            if run_id is None:
                run_id = client.create_run(exp_id, run_name=self.name, tags={"mlflow.source.name": source}).info.run_id
            self.mlflow, self.mlflow_run_id = client, run_id
            if resume_step is not None:
                client.set_tag(run_id, "resumed_from_step", str(resume_step))
            try:
                from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH as limit
            except ImportError:
                limit = 500
            # params cannot change once logged: a resumed run logs only the new ones
            params = [Param(k[:250], v[:limit]) for k, v in flat_params(config).items() if k[:250] not in logged]
            for i in range(0, len(params), 100):
                client.log_batch(run_id, params=params[i : i + 100])
        except (MlflowException, OSError) as e:
            raise ClozeformerError(f"--report-to mlflow ({uri}): {str(e).strip().splitlines()[0]}") from None

    # ------------------------------------------------------------------ reporting
    def _each(self, what: str, calls: dict[str, Any]) -> None:
        """Run each backend's call; a failure (a server gone away) warns once and training goes on:
        the run's own files hold every record."""
        for name, call in calls.items():
            try:
                call()
            except Exception as e:
                self.failures[name] = self.failures.get(name, 0) + 1
                if self.failures[name] == 1:
                    print(f"warning: --report-to {name}: could not {what} ({type(e).__name__}: {e})", file=sys.stderr)

    def _send(self, values: dict[str, float], step: int, to_wandb: bool = True) -> None:
        calls: dict[str, Any] = {}
        if self.tb is not None:
            calls["tensorboard"] = lambda: [self.tb.add_scalar(k, v, step) for k, v in values.items()]
        if self.wandb is not None and to_wandb:
            calls["wandb"] = lambda: self.wandb.log({**values, "step": step})
        if self.mlflow is not None:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            metrics = [Metric(k, v, now, step) for k, v in values.items()]
            calls["mlflow"] = lambda: [
                self.mlflow.log_batch(self.mlflow_run_id, metrics=metrics[i : i + 1000]) for i in range(0, len(metrics), 1000)
            ]
        self._each(f"log step {step}", calls)

    def log(self, record: dict[str, Any]) -> None:
        """One metrics record: {"kind": ..., "step": ..., name: value, ...}."""
        if self.report_to and (values := scalars(record)):
            self._send(values, int(record["step"]))

    def summary(self, record: dict[str, Any]) -> None:
        """Final values (the best evaluation): wandb's run summary; metrics at `step` elsewhere."""
        if not (self.report_to and (values := scalars(record))):
            return
        step = int(record["step"])
        if self.wandb is not None:
            summary = {**values, f"{record.get('kind', 'train')}/step": step}
            self._each("write the summary", {"wandb": lambda: self.wandb.summary.update(summary)})
        self._send(values, step, to_wandb=False)

    def close(self, failed: bool = False) -> None:
        """Finish the runs (marked failed when the training raised). Safe to call twice."""
        tb, run, client, self.tb, self.wandb, self.mlflow = self.tb, self.wandb, self.mlflow, None, None, None
        self.report_to = []
        calls: dict[str, Any] = {}
        if tb is not None:
            calls["tensorboard"] = tb.close
        if run is not None:
            calls["wandb"] = lambda: run.finish(exit_code=1 if failed else 0)
        if client is not None:
            calls["mlflow"] = lambda: client.set_terminated(self.mlflow_run_id, "FAILED" if failed else "FINISHED")
        self._each("finish the run", calls)
        for name, n in self.failures.items():
            if n > 1:
                print(f"warning: --report-to {name}: {n} calls failed; the run's own files have every record", file=sys.stderr)
        self.failures = {}

    def __enter__(self) -> Trackers:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(failed=exc_type is not None)
