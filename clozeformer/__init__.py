"""clozeformer: BERT end to end (vocab -> shards -> cloze pretraining -> fine-tuning -> inference).

Importing the package has no side effects; heavy modules (torch, tokenizers) load on first
use of the names below.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (PEP 562 lazy attributes)
_LAZY = {
    "BertConfig": "clozeformer.modeling.config",
    "ClozeformerError": "clozeformer.utils.errors",
    "BertModel": "clozeformer.modeling.bert",
    "BertForPreTraining": "clozeformer.modeling.bert",
    "BertForMaskedLM": "clozeformer.modeling.bert",
    "BertLMHeadModel": "clozeformer.modeling.bert",
    "BertForSequenceClassification": "clozeformer.modeling.bert",
    "BertForTokenClassification": "clozeformer.modeling.bert",
    "BertForQuestionAnswering": "clozeformer.modeling.bert",
    "BertForMultipleChoice": "clozeformer.modeling.bert",
    "pipeline": "clozeformer.infer.pipelines",
    "Tokenizer": "clozeformer.modeling.tokenizer",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'clozeformer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
