"""Fine-tuning quality on the shared task data: dev scores and time per task, pretrained vs random init.

    python benchmarks/finetune_quality.py --pretrained RUN/checkpoint --pretrained-zh RUN_ZH/checkpoint
    python benchmarks/finetune_quality.py --tasks sst2 conll2003 --inits random --size tiny   # quick check

For every task it runs `clozeformer finetune` in-process with one recipe for every starting
point, and prints one Markdown row per (task, init):

| init         | starting point                                                                      |
|--------------|-------------------------------------------------------------------------------------|
| pretrained   | `--pretrained DIR` (English) / `--pretrained-zh DIR` (Chinese): a `clozeformer pretrain` checkpoint |
| random       | random init of the pretrained model's architecture and vocab (without one: `--size` over Google's vocab) |
| transformers | the same, initialised by `transformers.BertForPreTraining` and saved with save_pretrained + vocab |

Tasks whose train split is not in the shared data are split here, reproducibly: QNLI's dev set
(80/20 by example), XQuAD-en and CMRC 2018's dev sets (80/20 by article, so no context is shared
between train and dev). The CPU budget is small on purpose: capped training examples, a time
limit per run (`--max-time`), a mini/tiny model. Scores are the tasks' official metrics on (at
most `--max-eval-examples` of) the dev split; they are far below the paper's, which used
BERT-base/large for hours on full training sets.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path(os.environ.get("CLOZEFORMER_SHARED_DATA", REPO.parent / "shared" / "data"))

# task -> (data location under tasks/, language, how to get a train split)
TASKS: dict[str, tuple[str, str, str | None]] = {
    "sst2": ("glue/SST-2", "en", None),
    "cola": ("glue/CoLA", "en", None),
    "mrpc": ("glue/MRPC", "en", None),
    "stsb": ("glue/STS-B", "en", None),
    "rte": ("glue/RTE", "en", None),
    "qnli": ("glue/QNLI", "en", "rows"),
    "conll2003": ("conll2003", "en", None),
    "xquad": ("squad/xquad/xquad.en.json", "en", "articles"),
    "chnsenticorp": ("zh/chnsenticorp", "zh", None),
    "cmrc2018": ("zh/cmrc2018/dev.json", "zh", "articles"),
}


def split_rows(src: Path, out: Path, seed: int) -> list[str]:
    """QNLI: dev.tsv -> train.tsv (80%) + dev.tsv (20%), header kept, rows shuffled with `seed`."""
    lines = src.read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    random.Random(seed).shuffle(rows)
    cut = int(0.8 * len(rows))
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.tsv").write_text("\n".join([header, *rows[:cut]]) + "\n", encoding="utf-8")
    (out / "dev.tsv").write_text("\n".join([header, *rows[cut:]]) + "\n", encoding="utf-8")
    return [f"train={out / 'train.tsv'}", f"dev={out / 'dev.tsv'}"]


def split_articles(src: Path, out: Path, seed: int) -> list[str]:
    """SQuAD-format JSON -> train.json (80% of articles) + dev.json (20%)."""
    doc = json.loads(src.read_text(encoding="utf-8"))
    articles = list(doc["data"])
    random.Random(seed).shuffle(articles)
    cut = int(0.8 * len(articles))
    out.mkdir(parents=True, exist_ok=True)
    for name, part in (("train.json", articles[:cut]), ("dev.json", articles[cut:])):
        (out / name).write_text(
            json.dumps({"version": doc.get("version", "1.1"), "data": part}, ensure_ascii=False), encoding="utf-8"
        )
    return [f"train={out / 'train.json'}", f"dev={out / 'dev.json'}"]


def architecture(size: str, like: str | None, vocab_dir: Path):
    """The BertConfig to initialise at random: the pretrained model's own (so only the weights
    differ), else preset `size` over the vocab."""
    from clozeformer.modeling.config import BertConfig
    from clozeformer.modeling.tokenizer import Tokenizer

    if like:
        return BertConfig.from_pretrained(like)
    return BertConfig.preset(size, vocab_size=Tokenizer.from_pretrained(vocab_dir).vocab_size)


def random_dir(size: str, like: str | None, vocab_dir: Path, out: Path, seed: int) -> Path:
    """A randomly initialised clozeformer BertForPreTraining, saved with the vocab."""
    import torch

    from clozeformer.modeling.bert import BertForPreTraining
    from clozeformer.modeling.tokenizer import Tokenizer

    torch.manual_seed(seed)
    BertForPreTraining(architecture(size, like, vocab_dir)).save_pretrained(out)
    Tokenizer.from_pretrained(vocab_dir).save(out)
    return out


def transformers_dir(size: str, like: str | None, vocab_dir: Path, out: Path, seed: int) -> Path:
    """A randomly initialised transformers.BertForPreTraining of the same shape, saved with its vocab."""
    import torch
    import transformers

    from clozeformer.modeling.tokenizer import Tokenizer

    tok = Tokenizer.from_pretrained(vocab_dir)
    ours = architecture(size, like, vocab_dir)
    cfg = transformers.BertConfig(
        vocab_size=ours.vocab_size,
        hidden_size=ours.hidden_size,
        num_hidden_layers=ours.num_hidden_layers,
        num_attention_heads=ours.num_attention_heads,
        intermediate_size=ours.intermediate_size,
        hidden_act=ours.hidden_act,
        max_position_embeddings=ours.max_position_embeddings,
        type_vocab_size=ours.type_vocab_size,
        pad_token_id=ours.pad_token_id,
    )
    torch.manual_seed(seed)
    transformers.BertForPreTraining(cfg).save_pretrained(out)
    tok.save(out)
    assert (out / "vocab.txt").is_file()
    return out


def run_one(task: str, data: list[str], model: str, tokenizer: str | None, out: Path, args) -> dict:
    from clozeformer.tasks.finetune import finetune
    from clozeformer.tasks.task_config import FinetuneConfig

    qa = task in ("xquad", "cmrc2018")
    cfg = FinetuneConfig(
        task=task,
        data=data,
        model=model,
        tokenizer=tokenizer,
        out=str(out),
        overwrite=True,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        seed=args.seed,
        max_length=args.qa_max_length if qa else args.max_length,
        doc_stride=args.doc_stride,
        max_train_examples=args.max_train_examples,
        max_eval_examples=args.max_eval_examples,
        max_time=args.max_time,
        threads=args.threads,
        eval_batch_size=args.eval_batch_size,
        report_to=["none"],
    )
    t0 = time.monotonic()
    result = finetune(cfg)
    result["wall_seconds"] = time.monotonic() - t0
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument(
        "--inits", nargs="+", default=["pretrained", "random", "transformers"], choices=["pretrained", "random", "transformers"]
    )
    p.add_argument("--pretrained", default=None, help="English model dir from `clozeformer pretrain` (with vocab.txt)")
    p.add_argument("--pretrained-zh", default=None, help="Chinese model dir from `clozeformer pretrain`")
    p.add_argument(
        "--size", default="mini", help="preset for random / transformers init when no pretrained model gives the architecture"
    )
    p.add_argument("--data", default=str(DEFAULT_DATA), help="the shared data folder")
    p.add_argument("--work", default=None, help="where splits and fine-tuned models go (default: a temp dir)")
    p.add_argument("--epochs", type=float, default=3.0)
    # 3e-4: the top of the grid Google searched for its small BERTs (tiny..medium), whose best lr
    # is higher than BERT-base's 2e-5..5e-5; one value for every init keeps the comparison fair
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--eval-batch-size", type=int, default=128)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--qa-max-length", type=int, default=256)
    p.add_argument("--doc-stride", type=int, default=64)
    p.add_argument("--max-train-examples", type=int, default=2000)
    p.add_argument("--max-eval-examples", type=int, default=500)
    p.add_argument("--max-time", type=float, default=2.0, help="minutes of training per run")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--json", default=None, help="also write all results to this JSON file")
    args = p.parse_args()

    data_root = Path(args.data) / "tasks"
    if not data_root.is_dir():
        print(f"error: {data_root}: no shared task data (pass --data)", file=sys.stderr)
        return 2
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="clozeformer-ft-bench-"))
    vocab = {"en": Path(args.data) / "vocab" / "bert-base-uncased", "zh": Path(args.data) / "vocab" / "bert-base-chinese"}
    pretrained = {"en": args.pretrained, "zh": args.pretrained_zh}
    for lang, d in pretrained.items():
        if d:
            vocab[lang] = Path(d)  # random init uses the pretrained model's vocab: only the weights differ
    print(
        f"work dir: {work}; recipe: epochs {args.epochs}, lr {args.lr}, batch {args.batch_size}, "
        f"max {args.max_train_examples} train / {args.max_eval_examples} dev examples, "
        f"max {args.max_time} min per run; random init: "
        + ", ".join(f"{lang}: {pretrained[lang] or args.size} architecture" for lang in ("en", "zh"))
    )

    rows, results = [], []
    init_dirs: dict[tuple[str, str], Path] = {}
    for task in args.tasks:
        where, lang, how = TASKS[task]
        src = data_root / where
        if how == "rows":
            data = split_rows(src / "dev.tsv", work / "data" / task, args.seed)
        elif how == "articles":
            data = split_articles(src, work / "data" / task, args.seed)
        else:
            data = [str(src)]
        for init in args.inits:
            if init == "pretrained":
                if not pretrained[lang]:
                    print(f"skip {task} / pretrained: no --pretrained{'-zh' if lang == 'zh' else ''} given")
                    continue
                model, tokenizer = pretrained[lang], None
            else:
                if (init, lang) not in init_dirs:
                    make = random_dir if init == "random" else transformers_dir
                    init_dirs[init, lang] = make(args.size, pretrained[lang], vocab[lang], work / f"{init}-{lang}", args.seed)
                model, tokenizer = str(init_dirs[init, lang]), None
            print(f"\n=== {task} / {init}: {model} ===", flush=True)
            r = run_one(task, data, model, tokenizer, work / "runs" / f"{task}-{init}", args)
            best = r["best"] or {}
            split = next(iter(r["eval_examples"]), "dev")
            scores = (best.get("scores") or {}).get(split, {})
            main = r["main_metric"]
            pct = task in ("xquad", "cmrc2018")  # SQuAD/CMRC scripts report percentages
            others = ", ".join(
                f"{k} {v:.1f}" if pct else f"{k} {v:.3f}"
                for k, v in scores.items()
                if k != main and not k.startswith(("f1_", "HasAns", "NoAns", "best_", "total"))
            )
            rows.append(
                f"| {task} | {init} | {main} | {scores.get(main, float('nan')):.4g} | {others} | "
                f"{r['train_examples']} | {r['steps']} ({r['epochs']:.2f} ep) | {r['train_seconds']:.0f} s |"
            )
            results.append(
                {
                    "task": task,
                    "init": init,
                    "model": model,
                    **{k: r[k] for k in ("main_metric", "train_examples", "steps", "epochs", "train_seconds", "stopped_early")},
                    "scores": scores,
                    "eval_examples": r["eval_examples"],
                }
            )

    print("\n| task | init | main metric | dev score | other dev metrics | train ex. | steps | train time |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
