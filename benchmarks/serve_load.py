"""Load test of `clozeformer serve`: latency and throughput at 1, 8 and 32 concurrent clients.

    python benchmarks/serve_load.py                       # mini classifier, 300 requests per level
    python benchmarks/serve_load.py --model DIR --task classify --requests 500

Starts the server itself on 127.0.0.1 (port 0: a free port), sends a bounded number of
requests per concurrency level over keep-alive connections from one asyncio client (one
text per request, SST-2 sentences when ../shared/data is present), stops the server with
SIGTERM, and prints a Markdown table. Only loopback traffic. Without --model it builds a random-init BERT of
--size with the bert-base-uncased vocab (or the test fixture vocab when the shared data is
absent). Exits 1 if any request failed. Mean batch = sequences per forward pass, read from
the server's /info counters: how much micro-batching merged concurrent requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("CLOZEFORMER_SHARED_DATA", ROOT.parent / "shared" / "data"))
HOST = "127.0.0.1"  # loopback only


def build_model(directory: Path, size: str) -> None:
    import torch

    from clozeformer.modeling.bert import BertForSequenceClassification
    from clozeformer.modeling.config import BertConfig
    from clozeformer.modeling.tokenizer import Tokenizer

    vocab = DATA / "vocab" / "bert-base-uncased"
    tok = Tokenizer.from_pretrained(vocab if vocab.is_dir() else ROOT / "tests" / "fixtures" / "infer_vocab.txt")
    torch.manual_seed(0)
    BertForSequenceClassification(
        BertConfig.preset(size, vocab_size=tok.vocab_size, id2label={0: "negative", 1: "positive"})
    ).save_pretrained(directory)
    tok.save(directory)


def load_texts(n: int) -> list[str]:
    sst2 = DATA / "tasks" / "glue" / "SST-2" / "train.tsv"
    if sst2.is_file():
        lines = sst2.read_text(encoding="utf-8").splitlines()[1 : n + 1]
        return [line.split("\t")[0] for line in lines]
    words = "the movie was good bad long fun boring and very not really a film".split()
    return [" ".join(words[(i + k) % len(words)] for k in range(3 + i % 12)) for i in range(n)]


def body_for(task: str, text: str) -> dict:
    if task == "qa":
        return {"question": "what is it about?", "context": text}
    if task == "fill-mask":
        words = text.split()
        words[len(words) // 2] = "[MASK]"
        return {"inputs": " ".join(words)}
    return {"inputs": text}


class Server:
    def __init__(self, model: Path, threads: int, max_wait_ms: float, batch_size: int) -> None:
        cmd = [
            sys.executable,
            "-m",
            "clozeformer",
            "serve",
            "--model",
            str(model),
            "--host",
            HOST,
            "--port",
            "0",
            "--log-level",
            "warning",
            "--threads",
            str(threads),
            "--max-wait-ms",
            str(max_wait_ms),
            "--batch-size",
            str(batch_size),
        ]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1")
        )
        self.stderr: list[str] = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        self.url = None
        for line in self.proc.stdout:
            m = re.search(rf"on (http://{re.escape(HOST)}:\d+)", line)
            if m:
                self.url = m.group(1)
                break
        if self.url is None:
            raise RuntimeError("server did not start:\n" + "".join(self.stderr))
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


async def wait_healthy(client, url: str, timeout: float = 120) -> None:
    import httpx

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if (await client.get(url + "/health")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError("server never became healthy")


class Connection:
    """One keep-alive HTTP/1.1 connection speaking just enough HTTP to POST JSON and read JSON.

    Why not httpx for the load itself: at 32 connections httpx's async client spends ~3 ms of
    CPU per request (measured here), as much as the server it is measuring, on the same two
    cores. A load generator has to be much cheaper than what it loads; this one costs ~0.05 ms.
    httpx still does /health and /info.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url: str) -> Connection:
        host, port = url.removeprefix("http://").split(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    async def post(self, path: str, body: dict) -> tuple[int, dict]:
        data = json.dumps(body).encode()
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        headers = dict(line.split(":", 1) for line in head[1:] if ":" in line)
        length = int({k.lower(): v for k, v in headers.items()}["content-length"])
        return status, json.loads(await self.reader.readexactly(length))

    def close(self) -> None:
        self.writer.close()


async def level(client, url: str, task: str, texts: list[str], clients: int, n: int) -> dict:
    """`n` requests over `clients` concurrent connections; latencies in ms, errors counted."""
    latencies: list[float] = []
    errors = 0
    counter = iter(range(n))
    conns = [await Connection.open(url) for _ in range(clients)]

    async def worker(conn: Connection) -> None:
        nonlocal errors
        for i in counter:
            t0 = time.perf_counter()
            try:
                status, body = await conn.post(f"/{task}", body_for(task, texts[i % len(texts)]))
                ok = status == 200 and len(body["results"]) == 1
            except Exception:  # noqa: BLE001 - any failure is an error of the run
                ok = False
            latencies.append((time.perf_counter() - t0) * 1000)
            errors += not ok

    before = (await client.get(url + "/info")).json()["stats"][task]
    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    wall = time.perf_counter() - start
    for c in conns:
        c.close()
    after = (await client.get(url + "/info")).json()["stats"][task]
    batches = after["batches"] - before["batches"]
    lat = sorted(latencies)
    return {
        "clients": clients,
        "requests": n,
        "errors": errors,
        "p50": statistics.median(lat),
        "p99": lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))],
        "rps": n / wall,
        "mean_batch": (after["sequences"] - before["sequences"]) / max(1, batches),
    }


async def run(url: str, task: str, texts: list[str], levels: list[int], n: int) -> list[dict]:
    import httpx

    async with httpx.AsyncClient(timeout=120) as client:
        await wait_healthy(client, url)
        await level(client, url, task, texts, 4, 20)  # warm-up
        return [await level(client, url, task, texts, c, n) for c in levels]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="model directory (default: build a random one)")
    ap.add_argument("--size", default="mini", help="preset of the built model")
    ap.add_argument("--task", default="classify", choices=["fill-mask", "classify", "embed", "qa", "ner"])
    ap.add_argument("--requests", type=int, default=300, help="requests per concurrency level (bounded)")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--threads", type=int, default=1, help="server torch threads (the client needs a core too)")
    ap.add_argument("--max-wait-ms", type=float, default=5.0)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    if not 1 <= args.requests <= 5000:
        ap.error("--requests must be 1..5000 (a bounded load test)")
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            model = Path(tmp) / "model"
            build_model(model, args.size)
        server = Server(model, args.threads, args.max_wait_ms, args.batch_size)
        try:
            results = asyncio.run(run(server.url, args.task, load_texts(1000), args.clients, args.requests))
        finally:
            rc = server.stop()
    what = f"{args.model}" if args.model else f"random-init BERT-{args.size}"
    print(
        f"\n`serve` load test: {what}, POST /{args.task}, one text per request, server threads "
        f"{args.threads}, max_wait_ms {args.max_wait_ms}, batch_size {args.batch_size}; server exit after "
        f"SIGTERM: {rc}\n"
    )
    print("| clients | requests | errors | p50 (ms) | p99 (ms) | throughput (req/s) | mean batch |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['clients']} | {r['requests']} | {r['errors']} | {r['p50']:.1f} | {r['p99']:.1f} | "
            f"{r['rps']:.0f} | {r['mean_batch']:.1f} |"
        )
    return 1 if any(r["errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
