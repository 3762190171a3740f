"""SWAG (Zellers et al. 2018) multiple choice, from the official `train.csv` / `val.csv` / `test.csv`.

    ,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label
    0,lsmdc..._phoenix-94857,18313,"Students lower their eyes nervously. She",...,2

The released files begin with an unnamed pandas index column; columns are found by name, so a
file without it reads too. `test.csv` has no `label`. Each of the four choices is encoded as the
pair (`sent1`, `sent2 + " " + endingN`), as in Hugging Face's `run_swag.py`; the BERT paper's
"concatenation of the given sentence and a possible continuation".
"""

from __future__ import annotations

from pathlib import Path

from clozeformer.tasks.common import ChoiceExample, Problems, Source, first_row, iter_csv
from clozeformer.utils.errors import ClozeformerError

ENDINGS = ("ending0", "ending1", "ending2", "ending3")


def read_swag(path: str | Path, problems: Problems, labeled: bool | None = True) -> list[ChoiceExample]:
    name = str(path)
    rows = iter_csv(path)
    line0, header = first_row(rows, path)
    cols = {c.strip(): i for i, c in enumerate(header)}
    for c in ("sent1", "sent2", *ENDINGS):
        if c not in cols:
            raise ClozeformerError(
                f"{path}:{line0}: no column {c!r} in the header; expected SWAG's "
                "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0..3,label"
            )
    has_label = "label" in cols
    if labeled and not has_label:
        raise ClozeformerError(f"{path}:{line0}: no 'label' column: a train/dev file needs labels")
    index_col = cols.get("")
    examples: list[ChoiceExample] = []
    for line, fields in rows:
        src = Source(name, line)
        problems.row(src)
        if len(fields) != len(header):
            problems.malformed(src, f"{len(fields)} fields, the header has {len(header)}")
            continue
        label = None
        if has_label and labeled is not False:
            raw = fields[cols["label"]].strip()
            if raw not in ("0", "1", "2", "3"):
                raise ClozeformerError(f"{src}: label {raw!r} is not 0, 1, 2 or 3")
            label = int(raw)
        guid = fields[index_col].strip() if index_col is not None else str(len(examples))
        examples.append(
            ChoiceExample(guid, fields[cols["sent1"]], fields[cols["sent2"]], [fields[cols[e]] for e in ENDINGS], label, src)
        )
    if not examples:
        raise ClozeformerError(f"{path}: no usable rows")
    return examples
