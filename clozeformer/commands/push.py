"""`clozeformer push`: upload a model directory to the Hugging Face Hub in one commit, with its
model card (the directory's README.md, or a generated one). Only the model's own files go
(`PUSHED`: config, weights, tokenizer, sentence-transformers files, card, metrics, the configs it
was made with); training state (optimizer, RNG, markers) stays home. `HF_TOKEN` authenticates.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

from clozeformer.hub import POOLING_FILES, SAFETENSORS, TOKENIZER_FILES, parse_hub_id
from clozeformer.utils.configs import flag_help
from clozeformer.utils.errors import ClozeformerError

#: What a pushed model directory consists of; training state (optimizer, RNG, markers) stays home.
PUSHED = (
    "config.json",
    *SAFETENSORS,
    *TOKENIZER_FILES,
    *POOLING_FILES,
    "generator/*",
    "model.onnx",
    "model.int8.onnx",
    "README.md",
    "metrics.json",
    "finetune_config.json",
    "pretrain_config.json",
)


@dataclass
class PushConfig:
    model: str = field(
        default="", metadata=flag_help("model directory to upload (a finetune output or a checkpoint)", required=True)
    )
    repo: str = field(default="", metadata=flag_help("Hub repository: org/name (created when missing)"))
    private: bool = field(default=False, metadata=flag_help("create the repository as private"))
    branch: str | None = field(default=None, metadata=flag_help("upload to this branch (default: main)"))
    message: str = field(default="Upload with clozeformer push", metadata=flag_help("commit message"))

    def __post_init__(self) -> None:
        if not self.model or not (Path(self.model) / "config.json").is_file():
            raise ClozeformerError(f"--model {self.model!r}: not a model directory (no config.json)")
        parsed = parse_hub_id(self.repo)
        if parsed is None or parsed[1] is not None or "/" not in self.repo:
            raise ClozeformerError(f"--repo {self.repo!r}: give a Hub repository as org/name")


def files_to_push(directory: Path) -> list[Path]:
    """The model's files (relative paths), the pushed set only."""
    files = [p.relative_to(directory) for p in sorted(directory.rglob("*")) if p.is_file()]
    return [f for f in files if any(fnmatch.fnmatch(f.as_posix(), pattern) for pattern in PUSHED)]


def push(cfg: PushConfig) -> str:
    """Upload the model directory in one commit (with a generated README.md when it has none);
    returns the commit URL."""
    from huggingface_hub import CommitOperationAdd, HfApi, errors

    from clozeformer.infer.backends import read_architecture
    from clozeformer.modeling.card import generic_card

    directory = Path(cfg.model)
    read_architecture(directory)  # refuse what would not load, before any upload
    files = files_to_push(directory)
    ops = [CommitOperationAdd(path_in_repo=f.as_posix(), path_or_fileobj=str(directory / f)) for f in files]
    if Path("README.md") not in files:
        ops.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=generic_card(directory, cfg.repo).encode()))
    api = HfApi(token=os.environ.get("HF_TOKEN") or None)
    try:
        api.create_repo(cfg.repo, private=cfg.private, exist_ok=True)
        if cfg.branch:
            api.create_branch(cfg.repo, branch=cfg.branch, exist_ok=True)
        info = api.create_commit(cfg.repo, operations=ops, commit_message=cfg.message, revision=cfg.branch)
    except errors.HfHubHTTPError as e:
        raise ClozeformerError(f"push to {cfg.repo}: the Hugging Face Hub answered {str(e).splitlines()[0]}") from None
    except (OSError, ValueError) as e:  # no network, no token
        raise ClozeformerError(f"push to {cfg.repo}: {e.__class__.__name__}: {str(e).splitlines()[0]}") from None
    print(f"pushed {len(ops)} files from {directory} to {cfg.repo}: {info.commit_url}")
    return str(info.commit_url)


CONFIG = PushConfig
main = push
