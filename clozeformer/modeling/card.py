"""Model cards: the README.md a model directory carries to the Hugging Face Hub.

`finetune` writes one beside every fine-tuned model and `pretrain` into every checkpoint, so a
directory says what it is (task, base model, data, metrics, the command that made it) before
anyone pushes it; `clozeformer push` uploads it, or a generated one when a directory has none.
The YAML front matter uses the Hub's fields (library_name, pipeline_tag, tags, base_model).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from clozeformer import __version__

#: architectures (config.json) -> the Hub's pipeline_tag
PIPELINE_TAGS = {
    "ForMaskedLM": "fill-mask",
    "ForPreTraining": "fill-mask",
    "ForSequenceClassification": "text-classification",
    "ForTokenClassification": "token-classification",
    "ForQuestionAnswering": "question-answering",
    "ForMultipleChoice": "multiple-choice",
    "ForCausalLM": "text-generation",
    "Model": "feature-extraction",
}


def command_line() -> str:
    """The command that is running, as a user would type it."""
    prog = "clozeformer" if sys.argv and Path(sys.argv[0]).name in ("clozeformer", "__main__.py") else Path(sys.argv[0]).name
    return " ".join([prog, *map(shlex.quote, sys.argv[1:])])


def render(
    title: str,
    architecture: str,
    facts: dict[str, Any],
    base_model: str | None = None,
    command: str | None = None,
    sentence_transformers: bool = False,
) -> str:
    """A README.md: Hub front matter, then what the model is and how it was made. A
    `sentence_transformers` directory (modules.json) is a sentence-similarity model of that library."""
    library = "sentence-transformers" if sentence_transformers else "transformers"
    front = ["---", f"library_name: {library}", "tags:", "- clozeformer", "- bert"]
    tag = next((tag for suffix, tag in PIPELINE_TAGS.items() if architecture.endswith(suffix)), None)
    if sentence_transformers:
        front.append("- sentence-transformers")
        tag = "sentence-similarity"
    if tag:
        front.append(f"pipeline_tag: {tag}")
    if base_model and not Path(base_model).exists():  # a Hub id, not a path on this machine
        front.append(f"base_model: {base_model}")
    lines = [*front, "---", "", f"# {title}", "", f"A `{architecture}` made with clozeformer {__version__}.", ""]
    for key, value in facts.items():
        if value is not None and value != {} and value != []:
            text = json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)
            lines.append(f"- **{key}**: {text}")
    if sentence_transformers:
        loads = (
            "in sentence-transformers as it is (`SentenceTransformer(DIR)`), and in clozeformer (`clozeformer embed --model DIR`)"
        )
    else:
        loads = "in `transformers` as it is (`AutoModel.from_pretrained(DIR)`), and in clozeformer (`clozeformer info DIR`)"
    lines += ["", f"It loads {loads}."]
    if command:
        lines += ["", "Made by:", "", "```bash", command, "```"]
    return "\n".join(lines) + "\n"


def architecture_of(directory: Path) -> str:
    try:
        archs = json.loads((directory / "config.json").read_text(encoding="utf-8")).get("architectures") or ["BertModel"]
    except (OSError, ValueError):
        return "BertModel"
    return str(archs[0])


def generic_card(directory: Path, repo: str) -> str:
    """The card `push` uploads for a directory without a README.md."""
    facts: dict[str, Any] = {}
    metrics = directory / "metrics.json"
    if metrics.is_file():
        m = json.loads(metrics.read_text(encoding="utf-8"))
        facts = {"task": m.get("task"), "dev scores (best)": (m.get("best") or {}).get("scores")}
    return render(repo, architecture_of(directory), facts, sentence_transformers=(directory / "modules.json").is_file())
