"""SQuAD-format JSON (SQuAD v1.1, v2.0, XQuAD, CMRC 2018) and span-QA rows from CSV/TSV/JSONL.

    {"version": "v2.0", "data": [{"title": ..., "paragraphs": [{"context": ...,
        "qas": [{"id": ..., "question": ..., "answers": [{"text": ..., "answer_start": 17}],
                 "is_impossible": false, "plausible_answers": [...]}]}]}]}

v1.1 has no `is_impossible`; v2.0 marks unanswerable questions with `is_impossible: true` and
empty `answers`. Each answer's `answer_start` must point at its text in the context. When it
does not (CMRC 2018's dev set has ~200 such answers), the nearest occurrence of the text is used
instead and the repair is counted; an answer whose text does not occur in the context at all is
dropped (counted). Evaluation scores predictions against answer *texts*, so repairs never
change a metric; they only decide which tokens a training example points at.
"""

from __future__ import annotations

import re
from pathlib import Path

from clozeformer.tasks.common import Answer, Problems, QAExample, Source, iter_records, json_line_index, read_text
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import json_object


def _locate(context: str, text: str, start: int) -> int:
    """answer_start if it points at `text`, else the occurrence of `text` nearest to it, else -1."""
    if 0 <= start and context[start : start + len(text)] == text:
        return start
    hits = (m.start() for m in re.finditer(f"(?={re.escape(text)})", context))  # overlapping occurrences too
    return min(hits, key=lambda h: abs(h - start), default=-1)


def _answers(raw, context: str, src: Source, problems: Problems) -> list[Answer]:
    out = []
    for a in raw or []:
        if not isinstance(a, dict) or not isinstance(a.get("text"), str):
            raise ClozeformerError(f"{src}: each answer must be an object with a 'text' string")
        text = a["text"]
        try:
            given = int(a.get("answer_start", -1))
        except (TypeError, ValueError):
            raise ClozeformerError(f"{src}: answer_start {a.get('answer_start')!r} is not an integer") from None
        if text == "":
            continue
        start = _locate(context, text, given)
        if start == -1:
            problems.warn(
                "answer_not_in_context",
                src,
                f"answer {text[:40]!r} does not occur in its context; kept for scoring, not used for training",
            )
            out.append(Answer(text, -1))
            continue
        if start != given:
            problems.warn(
                "answer_start_repaired",
                src,
                f"answer_start {given} does not point at {text[:40]!r}; using its occurrence at {start}",
            )
        out.append(Answer(text, start))
    return out


def read_squad(path: str | Path, problems: Problems, labeled: bool | None = True) -> list[QAExample]:
    """Examples of a SQuAD-format JSON file. `labeled=True` requires answers (or is_impossible)."""
    text = read_text(path)
    doc = json_object(text, str(path), " (expected SQuAD-format JSON)")
    if not isinstance(doc.get("data"), list):
        raise ClozeformerError(f"{path}: not SQuAD-format JSON (expected an object with a 'data' list)")
    lines = json_line_index(text, "id")
    name = str(path)
    examples: list[QAExample] = []
    for a, article in enumerate(doc["data"]):
        where = f"data[{a}]"
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            raise ClozeformerError(f"{path}: {where} has no 'paragraphs' list")
        title = str(article.get("title", ""))
        for p, para in enumerate(article["paragraphs"]):
            if not isinstance(para, dict) or not isinstance(para.get("context"), str) or not isinstance(para.get("qas"), list):
                raise ClozeformerError(f"{path}: {where}.paragraphs[{p}] needs a 'context' string and a 'qas' list")
            context = para["context"]
            for q, qa in enumerate(para["qas"]):
                loc = f"{where}.paragraphs[{p}].qas[{q}]"
                if not isinstance(qa, dict) or "id" not in qa or not isinstance(qa.get("question"), str):
                    raise ClozeformerError(f"{path}: {loc} needs an 'id' and a 'question' string")
                qid = str(qa["id"])
                src = Source(name, lines.get(qid, 0))
                impossible = bool(qa.get("is_impossible", False))
                answers = _answers(qa.get("answers"), context, src, problems)
                if labeled and not answers and not impossible:
                    if "answers" not in qa:
                        raise ClozeformerError(f"{src}: question {qid!r} ({loc}) has no 'answers'; a train/dev file needs them")
                    problems.warn("no_answer", src, f"question {qid!r} has no usable answer; skipped")
                    continue
                examples.append(QAExample(qid, qa["question"], context, answers, impossible, src, title))
    if not examples:
        raise ClozeformerError(f"{path}: no questions found")
    seen: set[str] = set()
    for ex in examples:
        if ex.qid in seen:
            raise ClozeformerError(f"{ex.source}: duplicate question id {ex.qid!r}")
        seen.add(ex.qid)
    return examples


def read_qa_table(
    path: str | Path,
    problems: Problems,
    *,
    question: str,
    context: str,
    answer: str,
    answer_start: str | None,
    id_column: str | None = None,
    labeled: bool | None = True,
) -> list[QAExample]:
    """Span QA from CSV/TSV/JSONL rows: a question, a context, and an answer.

    The answer cell is either the answer text (empty = no answer), or in JSONL the Hugging Face
    datasets layout `{"text": [...], "answer_start": [...]}`. Without an answer-start column
    the first occurrence of the answer in the context is used.
    """
    columns, rows = iter_records(path, problems)
    for col in (question, context):
        if col not in columns:
            raise ClozeformerError(f"{path}:1: no column {col!r} (columns: {', '.join(columns)})")
    has_answer = answer in columns
    if labeled and not has_answer:
        raise ClozeformerError(f"{path}:1: no answer column {answer!r} (columns: {', '.join(columns)}); pass --label-column")
    examples: list[QAExample] = []
    for src, row in rows:
        q, c = row.get(question), row.get(context)
        if not isinstance(q, str) or not isinstance(c, str):
            problems.malformed(src, f"{question!r} and {context!r} must be strings")
            continue
        qid = str(row.get(id_column)) if id_column and row.get(id_column) is not None else str(len(examples))
        answers: list[Answer] = []
        if has_answer and labeled is not False:
            cell = row.get(answer)
            if isinstance(cell, dict):  # HF datasets layout
                texts = cell.get("text", [])
                raw = [{"text": t, "answer_start": s} for t, s in zip(texts, cell.get("answer_start", [-1] * len(texts)))]
            elif isinstance(cell, str) or cell is None:
                start = row.get(answer_start) if answer_start else -1
                raw = [{"text": cell, "answer_start": start if start not in (None, "") else -1}] if cell else []
            else:
                raise ClozeformerError(f"{src}: answer {cell!r} must be a string or {{{{'text': [...], 'answer_start': [...]}}}}")
            answers = _answers(raw, c, src, problems)
        examples.append(QAExample(qid, q, c, answers, not answers and has_answer and labeled is not False, src))
    if not examples:
        raise ClozeformerError(f"{path}: no usable rows")
    return examples
