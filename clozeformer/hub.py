"""Model names -> local directories: a directory as it is, or a Hugging Face Hub model id.

Every place that takes a model directory (the verbs' `--model`, `pretrain --init-from`,
`from_pretrained`, the pipelines, the tokenizer) goes through `model_dir`. A Hub id
(`bert-base-uncased`, `google-bert/bert-base-chinese`, `org/name@revision`) is resolved with
`huggingface_hub.snapshot_download` into the standard cache (`HF_HUB_CACHE`, else `HF_HOME/hub`),
fetching only what a BERT model needs: config, tokenizer files, sentence-transformers pooling,
and the weights (safetensors when the repository has them, else `pytorch_model.bin`, read with
`weights_only=True`). `HF_TOKEN` is used for private and gated models; with `HF_HUB_OFFLINE=1`
nothing is fetched and a warm cache is used. A local directory of the same name wins.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from clozeformer.utils.errors import ClozeformerError

#: `name`, `org/name`, optionally `@revision` (a branch, tag or commit): the Hub's repo-id grammar.
_HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]{0,95}(?:/[A-Za-z0-9][\w.-]{0,95})?)(?:@(?P<rev>[\w./-]+))?$")

#: A model's tokenizer files and sentence-transformers pooling, fetched and pushed alike.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
POOLING_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "*Pooling/config.json")
#: What a BERT-family model directory may need; weights are asked for separately (safetensors first).
MODEL_FILES = ["config.json", *TOKENIZER_FILES, *POOLING_FILES]
SAFETENSORS = ["model.safetensors", "model.safetensors.index.json", "model-*.safetensors"]
PICKLED = ["pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model-*.bin"]


def parse_hub_id(name: str) -> tuple[str, str | None] | None:
    """(repo id, revision) when `name` is spelled like a Hub model id, else None."""
    m = _HUB_ID.match(name)
    if m is None or ".." in name or "--" in m["repo"] or m["repo"].endswith((".", "-")):
        return None
    return m["repo"], m["rev"]


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE), read when asked, so a test or a caller can set it."""
    return any(os.environ.get(v, "").upper() in ("1", "ON", "YES", "TRUE") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def cache_dir() -> Path:
    """The Hub cache `huggingface_hub` and `transformers` share: HF_HUB_CACHE, else HF_HOME/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.path.expandvars(os.path.expanduser(os.environ["HF_HUB_CACHE"])))
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"


def model_name(name: str) -> str:
    """How to report a model: a local directory's absolute path, a Hub id as it was given."""
    path = Path(name)
    return name if not path.exists() and parse_hub_id(name) else str(path.resolve())


def model_dir(name: str | os.PathLike, what: str = "model") -> Path:
    """A local directory for `name`: the directory itself when it exists, else the Hub snapshot of
    the model id `name` (downloaded once into the cache). Raises ClozeformerError (one line) for a
    missing directory, an unknown or gated model, a missing revision, or no network and no cache."""
    path = Path(name)
    if path.exists():
        return path
    parsed = parse_hub_id(str(name))
    if parsed is None:
        raise ClozeformerError(f"{name}: no such {what} directory (and not a Hugging Face Hub model id)")
    return _snapshot(*parsed, str(cache_dir()), offline())


@functools.lru_cache(maxsize=32)
def _snapshot(repo: str, revision: str | None, cache: str, local_only: bool) -> Path:
    """The snapshot directory of `repo` at `revision`, with the model files and one kind of weights."""
    try:
        from huggingface_hub import errors, snapshot_download
    except ImportError:
        raise ClozeformerError(f"{repo}: loading a Hub model id needs huggingface_hub (pip install huggingface_hub)") from None

    kw = dict(revision=revision, cache_dir=cache, local_files_only=local_only, token=os.environ.get("HF_TOKEN") or None)
    at = f"{repo}@{revision}" if revision else repo
    try:
        snap = Path(snapshot_download(repo, allow_patterns=MODEL_FILES + SAFETENSORS, **kw))
        if not any(snap.glob("*.safetensors")):
            snap = Path(snapshot_download(repo, allow_patterns=MODEL_FILES + PICKLED, **kw))
    except errors.GatedRepoError:
        raise ClozeformerError(
            f"{at}: a gated model on the Hugging Face Hub: accept its terms on huggingface.co and set HF_TOKEN"
        ) from None
    except errors.RevisionNotFoundError:
        raise ClozeformerError(f"{at}: the Hugging Face Hub has no revision {revision!r} of {repo}") from None
    except errors.RepositoryNotFoundError:
        raise ClozeformerError(
            f"{at}: no such model on the Hugging Face Hub (nor a local directory); a private model needs HF_TOKEN"
        ) from None
    except errors.LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if local_only else "the Hugging Face Hub cannot be reached"
        raise ClozeformerError(
            f"{at}: not a local directory, not in the Hub cache {cache}, and {why}; download it once with "
            f"network access (or copy the model directory here)"
        ) from None
    except errors.HfHubHTTPError as e:
        raise ClozeformerError(f"{at}: the Hugging Face Hub answered {e.__class__.__name__}: {str(e).splitlines()[0]}") from None
    if not (snap / "config.json").is_file():
        raise ClozeformerError(f"{at}: the Hub repository has no config.json (not a transformers model)")
    return snap
