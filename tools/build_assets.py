"""Rebuild the small corpus and task bundled in clozeformer/assets/ from ../shared/data.

Only openly licensed sources are used (see NOTICE): English Wikipedia (CC BY-SA 3.0),
public-domain Project Gutenberg books, 西游记 (public domain), QNLI dev (CC BY-SA 4.0).
Deterministic: the same inputs give byte-identical outputs (gzip mtime fixed to 0).

    python tools/build_assets.py [--shared ../shared/data]
"""

from __future__ import annotations

import argparse
import gzip
import io
import random
import re
from pathlib import Path

BOOKS = [
    "Agatha Christie___The Mysterious Affair at Styles.txt.gz",
    "Bram Stoker___Dracula.txt.gz",
    "Albert Einstein___Relativity_ The Special and General Theory.txt.gz",
]


def write_gz(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as f:
        f.write(text.encode("utf-8"))
    path.write_bytes(buf.getvalue())
    print(f"{path}: {len(text.encode('utf-8')) / 1e6:.2f} MB raw, {path.stat().st_size / 1e6:.2f} MB gz")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "clozeformer" / "assets"))
    args = ap.parse_args()
    src, out = Path(args.shared), Path(args.out)

    # English Wikipedia: whole WikiExtractor <doc> blocks of >= 1,500 characters, up to 2 MB
    docs, size = [], 0
    for shard in sorted((src / "text" / "enwiki").glob("wiki_*.gz")):
        text = gzip.open(shard, "rt", encoding="utf-8", errors="replace").read()
        for m in re.finditer(r"<doc [^>]*>\n.*?</doc>\n", text, flags=re.S):
            if len(m.group(0)) >= 1500:
                docs.append(m.group(0))
                size += len(m.group(0).encode("utf-8"))
        if size > 2_000_000:
            break
    write_gz(out / "corpus" / "en_wikipedia.txt.gz", "".join(docs))

    # Public-domain books, paragraph text as Gutenberg ships it
    books = [gzip.open(src / "text" / "gutenberg" / b, "rt", encoding="utf-8", errors="replace").read() for b in BOOKS]
    write_gz(out / "corpus" / "en_books.txt.gz", "\n\n\n".join(b.replace("\r\n", "\n") for b in books))

    # 西游记, chapters 1-30 in order (CRLF -> LF, full-width indent stripped), blank line between
    novel = src / "text" / "zh" / "classic_novels" / "verbatim" / "西游记"
    cn_num = "一二三四五六七八九十"

    def chapter_no(p: Path) -> int:
        total, cur = 0, 0
        for ch in re.search(r"第(.+?)回", p.name).group(1):
            if ch == "百":
                total += max(cur, 1) * 100
                cur = 0
            elif ch == "十":
                total += max(cur, 1) * 10
                cur = 0
            else:
                cur = cn_num.index(ch) + 1
        return total + cur

    chapters = sorted(novel.glob("*.txt"), key=chapter_no)[:30]
    parts = []
    for p in chapters:
        t = p.read_text(encoding="utf-8").replace("\r\n", "\n")
        lines = [ln.strip().strip("\u00a0\u3000 ") for ln in t.split("\n")]
        parts.append("\n\n".join(ln for ln in lines if ln))
    write_gz(out / "corpus" / "zh_xiyouji.txt.gz", "\n\n\n".join(parts) + "\n")

    # QNLI dev (CC BY-SA 4.0) split into a small train/dev pair for the quickstart demo
    rows = (src / "tasks" / "glue" / "QNLI" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    header, body = rows[0], rows[1:]
    random.Random(0).shuffle(body)
    (out / "tasks" / "qnli").mkdir(parents=True, exist_ok=True)
    (out / "tasks" / "qnli" / "train.tsv").write_text("\n".join([header] + body[:4000]) + "\n", encoding="utf-8")
    (out / "tasks" / "qnli" / "dev.tsv").write_text("\n".join([header] + body[4000:]) + "\n", encoding="utf-8")
    print(f"QNLI: 4000 train / {len(body) - 4000} dev rows")


if __name__ == "__main__":
    main()
