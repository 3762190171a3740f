"""`clozeformer serve`: the pipelines over HTTP (FastAPI + uvicorn), with micro-batching.

Endpoints (JSON in, JSON out; `inputs` is one item or a list, `results` is always a list):

    GET  /health      {"status": "ok"}
    GET  /info        model, architecture, backend, tasks, labels, limits, batching stats
    GET  /metrics     Prometheus text format: requests, latency, batch sizes, requests in flight
    POST /fill-mask   {"inputs": "The cat sat on the [MASK].", "top_k": 3}
    POST /classify    {"inputs": ["text", ["text", "pair"], {"text": ..., "text_pair": ...}]}
    POST /embed       {"inputs": ["text", ...]}
    POST /qa          {"question": ..., "context": ...}  or  {"inputs": [{"question", "context"}, ...]}
    POST /ner         {"inputs": "John lives in Paris."}

The same pipelines also answer in the shapes existing clients speak (infer/compat.py):
/hf/<pipeline tag> (the HF Inference API, for huggingface_hub.InferenceClient), /tei/embed,
/tei/predict and /tei/rerank (text-embeddings-inference), /v1/embeddings and /v1/models (OpenAI).

A task the model has no head for answers 404 with the reason. Bad input never yields a 500:
too many items, a text over `max_chars` or a body over `max_body_bytes` -> 413; malformed JSON,
wrong fields, empty text, no [MASK], an overlong input under `--overlong reject` -> 422. Every
error body is {"error": message} (+ "index" of the offending item).

Micro-batching: each request is tokenized on arrival (a big one in a thread, so the event
loop stays free), then queued. A per-task collector takes the first waiting request, gathers
more for up to `max_wait_ms` or until `batch_size` sequences wait, and runs them all as one
`pipe.run` in the single model thread (forward passes never overlap; torch's intra-op
threads parallelise each one). Under load, N concurrent clients cost about N/batch_size
forward passes, not N.

The app is a `Service` (the state, and one method per route family) whose methods `create_app`
registers as routes. No `from __future__ import annotations` here: FastAPI reads the endpoints'
annotations at runtime, and `Request` is imported lazily (fastapi is an optional extra).

Shutdown: on SIGTERM/SIGINT uvicorn stops accepting connections, lets in-flight requests finish
(up to `graceful_timeout` s), then the lifespan hook drains the collectors and the model thread
and prints "stopped after serving N requests". uvicorn then re-raises the signal, so the exit
status says "terminated by SIGTERM" (-15 / 143), as process supervisors expect.
"""

import asyncio
import contextlib
import json
import logging
import re
import socket
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate
from typing import Any, Literal

from clozeformer import __version__
from clozeformer.hub import model_name
from clozeformer.infer import compat
from clozeformer.infer.backends import TASKS, tasks_for
from clozeformer.infer.options import RunnerOptions
from clozeformer.modeling.config import Pooling
from clozeformer.utils.errors import ClozeformerError

log = logging.getLogger("clozeformer.serve")

#: the JSON fields that hold text, per kind of item (checked against max_chars)
TEXT_FIELDS = ("text", "text_pair", "question", "context")
#: requests up to this many characters are tokenized on the event loop (tens of microseconds);
#: larger ones in a thread, so that one big request does not stall every other client
INLINE_TOKENIZE_CHARS = 4000


@dataclass
class ServeConfig(RunnerOptions):
    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on (0.0.0.0 = all interfaces)"})
    port: int = field(default=8000, metadata={"help": "TCP port (0 = any free port; the chosen one is printed)"})
    tasks: list[str] = field(default_factory=list, metadata={"help": "tasks to serve (default: all the model supports)"})
    max_wait_ms: float = field(default=5.0, metadata={"help": "how long a request waits for others to batch with"})
    max_items: int = field(default=64, metadata={"help": "most items per request (more: 413)"})
    max_chars: int = field(default=20000, metadata={"help": "longest text field, in characters (longer: 413)"})
    max_body_bytes: int = field(default=2_000_000, metadata={"help": "largest request body (larger: 413)"})
    top_k: int = field(default=5, metadata={"help": "fill-mask: candidates per [MASK] (requests may ask fewer)"})
    pooling: Pooling | None = field(
        default=None, metadata={"help": "embed: pooling (unset: a sentence-transformers directory's own, else cls)"}
    )
    doc_stride: int | None = field(
        default=None, metadata={"help": "qa: tokens shared by consecutive windows (unset: the model's)"}
    )
    max_answer_length: int | None = field(default=None, metadata={"help": "qa: longest answer in tokens (unset: the model's)"})
    max_question_length: int | None = field(
        default=None, metadata={"help": "qa: longest question in tokens (unset: the model's)"}
    )
    allow_no_answer: bool | None = field(
        default=None, metadata={"help": 'qa: answer "" when [CLS] beats every span (unset: the model\'s v2.0 setting)'}
    )
    aggregation: Literal["first", "average"] = field(default="first", metadata={"help": "ner: word label rule"})
    stride: int | None = field(
        default=None,
        metadata={"help": "ner: tokens shared by consecutive windows of a long text (default: a quarter window, <= 32)"},
    )
    graceful_timeout: float = field(default=30.0, metadata={"help": "seconds in-flight requests get at shutdown"})
    max_connections: int = field(
        default=512,
        metadata={"help": "open connections and in-flight requests at most; more are answered 503 (uvicorn limit_concurrency)"},
    )
    keep_alive_timeout: float = field(default=5.0, metadata={"help": "seconds an idle keep-alive connection stays open"})
    header_timeout: float = field(
        default=10.0,
        metadata={
            "help": "seconds a client may take to send a request's headers, counted from the connection's opening "
            "or its previous response (slower: 408, connection closed)"
        },
    )
    body_timeout: float = field(
        default=30.0, metadata={"help": "seconds a client may take to send a request body (slower: 408, connection freed)"}
    )
    log_level: Literal["critical", "error", "warning", "info", "debug"] = field(
        default="info", metadata={"help": "uvicorn log level"}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("max_items", "max_chars", "max_body_bytes", "top_k", "max_connections"):
            if getattr(self, name) < 1:
                raise ClozeformerError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        for name in ("header_timeout", "body_timeout", "keep_alive_timeout"):
            if not getattr(self, name) > 0:
                raise ClozeformerError(f"--{name.replace('_', '-')} must be > 0 seconds, got {getattr(self, name)}")
        if self.max_wait_ms < 0:
            raise ClozeformerError(f"--max-wait-ms must be >= 0, got {self.max_wait_ms}")
        if not 0 <= self.port <= 65535:
            raise ClozeformerError(f"--port {self.port}: must be 0..65535")
        unknown = [t for t in self.tasks if t not in TASKS]
        if unknown:
            raise ClozeformerError(f"--tasks: unknown {', '.join(unknown)}; choose from {', '.join(TASKS)}")

    def task_options(self, task: str) -> dict[str, Any]:
        names = {
            "fill-mask": ("top_k",),
            "embed": ("pooling",),
            "qa": ("doc_stride", "max_answer_length", "max_question_length", "allow_no_answer"),
            "ner": ("aggregation", "stride"),
        }.get(task, ())
        return {name: getattr(self, name) for name in names}


class HTTPError(Exception):
    def __init__(self, status: int, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.index = status, message, index


# ----------------------------------------------------------------------------- micro-batching


class MicroBatcher:
    """Gathers the examples of concurrent requests into one `pipe.run` (see module docstring)."""

    def __init__(self, pipe, executor: ThreadPoolExecutor, batch_size: int, max_wait_ms: float) -> None:
        self.pipe = pipe
        self.executor = executor
        self.batch_size = batch_size
        self.max_wait = max_wait_ms / 1000.0
        self.queue: asyncio.Queue | None = None
        self.worker: asyncio.Task | None = None
        # requests / batches / sequences: completed; in_flight: submitted and not yet answered
        self.stats = {"requests": 0, "batches": 0, "sequences": 0, "in_flight": 0}
        self.on_batch: list[Callable[[int], None]] = []  # called with each forward pass's sequence count

    def start(self) -> None:
        self.queue = asyncio.Queue()
        self.worker = asyncio.create_task(self._collect())

    async def stop(self) -> None:
        """Finish what is queued, then end the collector."""
        if self.worker is not None:
            await self.queue.put(None)
            await self.worker

    async def submit(self, examples: list) -> list:
        future = asyncio.get_running_loop().create_future()
        self.stats["in_flight"] += 1
        try:
            await self.queue.put((examples, future))
            return await future
        finally:
            self.stats["in_flight"] -= 1

    async def _collect(self) -> None:
        loop = asyncio.get_running_loop()
        stopping = False  # a None job: stop, after running the jobs in hand
        while not stopping and (job := await self.queue.get()) is not None:
            jobs, waiting, deadline = [job], sum(len(e.windows) for e in job[0]), loop.time() + self.max_wait
            while waiting < self.batch_size and (remaining := deadline - loop.time()) > 0:
                try:
                    job = await asyncio.wait_for(self.queue.get(), remaining)
                except asyncio.TimeoutError:
                    break
                if stopping := job is None:
                    break
                jobs.append(job)
                waiting += sum(len(e.windows) for e in job[0])
            jobs = [j for j in jobs if not j[1].done()]  # a client that went away was cancelled
            if jobs:
                await self._run(loop, jobs, waiting)

    async def _run(self, loop, jobs: list, sequences: int) -> None:
        examples = [e for exs, _ in jobs for e in exs]
        try:
            results = await loop.run_in_executor(self.executor, self.pipe.run, examples)
        except Exception as e:  # noqa: BLE001 - the requests' handlers report it as a 500
            for _, future in jobs:
                if not future.done():
                    future.set_exception(e)
            return
        self.stats["requests"] += len(jobs)
        self.stats["batches"] += 1
        self.stats["sequences"] += sequences
        for observe in self.on_batch:
            observe(sequences)
        start = 0
        for exs, future in jobs:
            if not future.done():
                future.set_result(results[start : start + len(exs)])
            start += len(exs)


# ----------------------------------------------------------------------------- request parsing

#: deepest JSON nesting a request may have (bodies are at most a list of objects of strings)
MAX_JSON_DEPTH = 32
#: a JSON string, escapes included; an unterminated one runs to the end
JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)


def parse_body(raw: bytes) -> Any:
    """The request body as JSON; HTTPError(422) for anything a pipeline could not take.

    Beyond syntax: nesting deeper than MAX_JSON_DEPTH (checked before parsing, so 100,000 `[`
    cost one linear scan, not a RecursionError) and strings holding unpaired UTF-16 surrogates
    ("\\ud800" is valid JSON but no text), which the tokenizer cannot encode.
    """
    depths = accumulate(1 if b in b"[{" else -1 for b in JSON_STRING.sub(b"", raw) if b in b"[]{}")  # outside strings
    if max(depths, default=0) > MAX_JSON_DEPTH:
        raise HTTPError(422, f"the body nests JSON deeper than {MAX_JSON_DEPTH} levels")
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise HTTPError(422, f"the body is not valid JSON ({e})") from None
    try:  # every string of the body, keys included, must encode: a lone surrogate does not
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise HTTPError(422, "a string holds an unpaired UTF-16 surrogate (e.g. \\ud800): not text") from None
    return body


def _items(task: str, body: Any) -> list[Any]:
    """The request's items, in the form the task's pipeline takes; HTTPError(422) when malformed."""
    if not isinstance(body, dict):
        raise HTTPError(422, "the body must be a JSON object")
    if task == "qa" and "inputs" not in body:
        if "question" not in body or "context" not in body:
            raise HTTPError(422, 'qa needs {"question": ..., "context": ...} or {"inputs": [...]}')
        return [{"question": body["question"], "context": body["context"]}]
    if "inputs" not in body:
        raise HTTPError(422, "missing field 'inputs' (a text or a list of them)")
    inputs = body["inputs"]
    items = inputs if isinstance(inputs, list) else [inputs]
    if not items:
        raise HTTPError(422, "'inputs' is an empty list")
    if task == "classify":
        if "text_pair" in body:
            if isinstance(inputs, list):
                raise HTTPError(422, "top-level 'text_pair' goes with a single text; in a list give [text, pair]")
            items = [{"text": inputs, "text_pair": body["text_pair"]}]
        items = [tuple(x) if isinstance(x, list) and len(x) == 2 else x for x in items]  # JSON pairs
    return items


def _texts(item: Any) -> list[str]:
    """The texts of one item: a text, a (text, text_pair) tuple, or a dict's TEXT_FIELDS."""
    if isinstance(item, dict):
        item = tuple(item.get(k) for k in TEXT_FIELDS)
    return [v for v in (item if isinstance(item, tuple) else (item,)) if isinstance(v, str)]


def _check_sizes(items: list[Any], cfg: ServeConfig) -> int:
    """The items' total characters; HTTPError(413) for too many items or too long a text."""
    if len(items) > cfg.max_items:
        raise HTTPError(413, f"{len(items)} items in one request; the limit is {cfg.max_items}")
    for i, item in enumerate(items):
        for v in _texts(item):
            if len(v) > cfg.max_chars:
                raise HTTPError(413, f"a text of {len(v)} characters; the limit is {cfg.max_chars}", i)
    return sum(len(v) for item in items for v in _texts(item))


# ----------------------------------------------------------------------------- the app


def _error(status: int, message: str, index: int | None = None):
    """Every error's response: {"error": message} (+ "index" of the offending item)."""
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": message} if index is None else {"error": message, "index": index}, status_code=status)


class Service:
    """What the app's routes share: the pipelines, the config and one micro-batcher per task on
    the single model thread. Each route family is one method, `respond(body)` -> JSON; `route`
    wires it in behind the body reading and the mapping of bad input to its status."""

    def __init__(self, pipes: dict[str, Any], cfg: ServeConfig, info: dict | None = None) -> None:
        self.pipes, self.cfg, self.extra_info = pipes, cfg, info or {}
        # One model thread: forward passes run one at a time, each using all intra-op threads.
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clozeformer-model")
        self.batchers = {task: MicroBatcher(p, self.executor, cfg.batch_size, cfg.max_wait_ms) for task, p in pipes.items()}
        self.started = time.time()
        self.any_pipe = next(iter(pipes.values()))
        self.model_id = self.extra_info.get("model") or "clozeformer"

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        for b in self.batchers.values():
            b.start()
        yield
        for b in self.batchers.values():  # uvicorn has already let in-flight requests finish
            await b.stop()
        self.executor.shutdown(wait=True)
        served = sum(b.stats["requests"] for b in self.batchers.values())
        print(f"stopped after serving {served} requests", flush=True)

    # -- what every POST route shares
    def route(self, app, path: str, task: str, respond: Callable, summary: str) -> None:
        """POST `path` for `task`: each request's body read and parsed, `respond(body)` -> JSON, and
        each kind of bad input mapped to its status (see module docstring)."""
        from fastapi import Request
        from fastapi.responses import JSONResponse
        from starlette.requests import ClientDisconnect

        from clozeformer.infer.pipelines import InputError

        async def endpoint(request: Request):
            if task not in self.pipes:
                return self.not_served(task)
            try:
                return JSONResponse(await respond(await self.read_body(request)))
            except ClientDisconnect:  # the client left mid-body: nobody to answer, nothing to log loudly
                log.debug("client disconnected before sending the whole body of %s", request.url.path)
                return _error(400, "client disconnected")
            except HTTPError as e:
                return _error(e.status, e.message, e.index)
            except InputError as e:
                return _error(422, e.reason, e.index)
            except (ClozeformerError, compat.BadRequest) as e:
                return _error(422, str(e))

        app.add_api_route(path, endpoint, methods=["POST"], name=path, summary=summary)

    def not_served(self, task: str):
        """404: why this server does not serve `task`."""
        arch = self.any_pipe.runner.architecture
        why = "was not enabled with --tasks" if task in tasks_for(arch) else f"a {arch} has no head for it"
        return _error(404, f"this server does not serve {task}: {why}; it serves {', '.join(self.pipes)}")

    async def read_body(self, request) -> Any:
        limit, timeout = self.cfg.max_body_bytes, self.cfg.body_timeout
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise HTTPError(413, f"request body of {declared} bytes; the limit is {limit}")
        chunks: list[bytes] = []

        async def receive() -> None:
            size = 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:  # a body without content-length is cut off as it grows
                    raise HTTPError(413, f"request body over {limit} bytes; the limit is {limit}")
                chunks.append(chunk)

        try:  # a slow (or slowloris) client cannot hold a connection slot for longer than this
            await asyncio.wait_for(receive(), timeout)
        except asyncio.TimeoutError:
            raise HTTPError(408, f"the request body took longer than {timeout:g} s to arrive") from None
        return parse_body(b"".join(chunks))

    async def answer(self, task: str, items: list[Any], prepare: Callable[[list], None] | None = None) -> list[dict]:
        """`items` through `task`'s pipeline: size limits, tokenization, the micro-batched forward
        pass; the results as JSON. `prepare` may mark the tokenized examples (per-request options)."""
        pipe = self.pipes[task]
        if _check_sizes(items, self.cfg) <= INLINE_TOKENIZE_CHARS:
            examples = pipe.preprocess(items)  # microseconds: cheaper than a thread hop
        else:
            examples = await asyncio.to_thread(pipe.preprocess, items)
        if prepare is not None:
            prepare(examples)
        return [pipe.to_json(r) for r in await self.batchers[task].submit(examples)]

    # -- the routes (the GET ones without docstrings: FastAPI would show them in /docs)
    async def health(self) -> dict:  # GET /health
        return {"status": "ok"}

    async def info(self) -> dict:  # GET /info
        cfg, pipe = self.cfg, self.any_pipe
        return {
            "clozeformer": __version__,
            **self.extra_info,
            **pipe.runner.describe(),
            "tasks": list(self.pipes),
            "labels": getattr(self.pipes.get("classify") or self.pipes.get("ner"), "labels", None),
            "max_length": pipe.max_length,
            "overlong": cfg.overlong,
            "limits": {"max_items": cfg.max_items, "max_chars": cfg.max_chars, "max_body_bytes": cfg.max_body_bytes},
            "batching": {"batch_size": cfg.batch_size, "max_wait_ms": cfg.max_wait_ms},
            "stats": {task: b.stats for task, b in self.batchers.items()},
            "uptime_s": round(time.time() - self.started, 1),
        }

    async def own(self, task: str, body: Any) -> dict:
        """POST /{task}, our own shape: {"inputs": ...} -> {"results": [...]}."""
        pipe = self.pipes[task]
        items = _items(task, body)
        top_k = body.get("top_k", pipe.top_k) if task == "fill-mask" else None
        if task == "fill-mask" and (type(top_k) is not int or not 1 <= top_k <= pipe.top_k):
            raise HTTPError(422, f"top_k must be an integer from 1 to {pipe.top_k}")
        results = await self.answer(task, items)
        if task == "fill-mask" and top_k < pipe.top_k:
            for r in results:
                for m in r["masks"]:
                    m["candidates"] = m["candidates"][:top_k]
        return {"results": results}

    async def hf(self, tag: str, task: str, body: Any) -> Any:
        """POST /hf/{tag}, the HF Inference API's shapes: huggingface_hub.InferenceClient(model="http://HOST:PORT/hf/TAG")."""
        items, single, params = compat.parse_hf(tag, body)
        top_k = params.get("top_k")
        if tag == "fill-mask" and top_k is not None and (type(top_k) is not int or not 1 <= top_k <= self.pipes[task].top_k):
            raise HTTPError(422, f"top_k must be an integer from 1 to {self.pipes[task].top_k}")
        normalize = params.get("normalize")
        mark = (lambda exs: [e.data.update(normalize=bool(normalize)) for e in exs]) if normalize is not None else None
        return compat.to_hf(tag, items, await self.answer(task, items, mark), single, params)

    async def tei_embed(self, body: Any) -> list:
        """POST /tei/embed: text-embeddings-inference's /embed (and /predict, /rerank below)."""
        texts, normalize = compat.parse_tei_embed(body)
        results = await self.answer("embed", texts, lambda exs: [e.data.update(normalize=normalize) for e in exs])
        return [r["embedding"] for r in results]

    async def tei_predict(self, body: Any) -> Any:
        items, single = compat.parse_tei_predict(body)
        return compat.to_tei_predict(await self.answer("classify", items), single)

    async def tei_rerank(self, body: Any) -> list:
        query, texts, return_text = compat.parse_tei_rerank(body)
        results = await self.answer("classify", [(query, t) for t in texts])
        return compat.to_tei_rerank(texts, [self.pipes["classify"].relevance(r) for r in results], return_text)

    async def openai_embeddings(self, body: Any) -> dict:
        """POST /v1/embeddings, for openai.OpenAI(base_url="http://HOST:PORT/v1").embeddings.create(...)."""
        texts, fmt = compat.parse_openai_embeddings(body)
        tokens: list[int] = []
        results = await self.answer("embed", texts, lambda exs: tokens.extend(len(w.input_ids) for e in exs for w in e.windows))
        return compat.to_openai_embeddings(results, body.get("model") or self.model_id, fmt, sum(tokens))

    async def openai_models(self) -> dict:  # GET /v1/models
        model = {"id": self.model_id, "object": "model", "created": int(self.started), "owned_by": "clozeformer"}
        return {"object": "list", "data": [model]}


def create_app(pipes: dict[str, Any], cfg: ServeConfig, info: dict | None = None):
    """The FastAPI app serving `pipes` ({task: Pipeline}, sharing one runner)."""
    try:
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse
    except ImportError:
        raise ClozeformerError("serving needs fastapi and uvicorn (pip install 'clozeformer[serve]')") from None
    service = Service(pipes, cfg, info)
    app = FastAPI(title="clozeformer", version=__version__, lifespan=service.lifespan)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        return _error(500, f"internal error: {type(exc).__name__}: {exc}")

    post = partial(service.route, app)
    app.add_api_route("/health", service.health, methods=["GET"], name="health")
    app.add_api_route("/info", service.info, methods=["GET"], name="get_info")
    for task in TASKS:
        post(f"/{task}", task, partial(service.own, task), f"{task} (see `clozeformer serve --help`)")
    for tag, task in compat.HF_TASKS.items():
        post(f"/hf/{tag}", task, partial(service.hf, tag, task), f"{tag}, as the Hugging Face Inference API")
    post("/tei/embed", "embed", service.tei_embed, "embeddings, as text-embeddings-inference")
    post("/tei/predict", "classify", service.tei_predict, "classification, as text-embeddings-inference")
    post("/tei/rerank", "classify", service.tei_rerank, "cross-encoder reranking, as text-embeddings-inference")
    post("/v1/embeddings", "embed", service.openai_embeddings, "embeddings, as the OpenAI API")
    app.add_api_route("/v1/models", service.openai_models, methods=["GET"], name="openai_models")
    add_metrics(app, service.batchers)
    return app


def add_metrics(app, batchers: dict[str, MicroBatcher]) -> None:
    """GET /metrics in Prometheus' text format (prometheus-client, an optional extra): requests by
    route and status, latency by route, sequences per forward pass and requests in flight by task.
    Each app has its own registry. Without prometheus-client, /metrics answers 501 saying so."""
    from fastapi.responses import JSONResponse, Response

    try:
        import prometheus_client as prom
    except ImportError:

        @app.get("/metrics")
        async def no_metrics() -> JSONResponse:
            return JSONResponse({"error": "metrics need prometheus-client (pip install 'clozeformer[serve]')"}, 501)

        return
    registry = prom.CollectorRegistry()
    requests = prom.Counter("clozeformer_requests", "HTTP requests by route and status", ["route", "status"], registry=registry)
    latency = prom.Histogram("clozeformer_request_seconds", "request latency by route", ["route"], registry=registry)
    batch = prom.Histogram(
        "clozeformer_batch_sequences",
        "sequences per forward pass (micro-batching)",
        ["task"],
        buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
        registry=registry,
    )
    in_flight = prom.Gauge("clozeformer_in_flight", "requests queued or running, by task", ["task"], registry=registry)
    for task, b in batchers.items():
        b.on_batch.append(batch.labels(task).observe)
        in_flight.labels(task).set_function(lambda b=b: b.stats["in_flight"])

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(prom.generate_latest(registry), media_type=prom.CONTENT_TYPE_LATEST)

    @app.middleware("http")
    async def observe(request, call_next):
        t0 = time.perf_counter()
        response = await call_next(request)
        paths = {getattr(r, "path", None) for r in app.routes}
        path = request.url.path if request.url.path in paths else "other"  # bounded label values
        requests.labels(path, str(response.status_code)).inc()
        latency.labels(path).observe(time.perf_counter() - t0)
        return response


def build_pipelines(cfg: ServeConfig) -> dict[str, Any]:
    """{task: Pipeline} for the tasks to serve, all on the model (runner and tokenizer) the first one loads."""
    from clozeformer.hub import model_dir
    from clozeformer.infer.backends import read_architecture, require_task
    from clozeformer.infer.pipelines import pipeline

    directory = model_dir(cfg.model)
    architecture = read_architecture(directory)[1]
    tasks = cfg.tasks or tasks_for(architecture)
    for task in tasks:  # before loading any weights
        require_task(task, architecture, str(directory))
    kw = cfg.pipeline_kwargs() | {"threads": cfg.threads or None}  # --threads 0: torch's choice
    first = pipeline(tasks[0], directory, **kw, **cfg.task_options(tasks[0]))
    pipes = {tasks[0]: first}
    for task in tasks[1:]:
        pipes[task] = pipeline(task, first.runner, tokenizer=first.tokenizer, **kw, **cfg.task_options(task))
    return pipes


def bind(host: str, port: int) -> socket.socket:
    """Our own listening socket: a busy port is a clear error, and port 0 reports the real port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose
    # proto says TCP. With proto 0, a keep-alive response's body waits for the client's
    # delayed ACK of its headers: +40 ms on every request after a connection's first.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ClozeformerError(f"cannot listen on {host}:{port} ({e.strerror})") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def header_timeout_protocol(seconds: float) -> type:
    """uvicorn's h11 protocol with a deadline for each request's headers, which uvicorn lacks: a
    client that opens a connection (or gets a keep-alive response) and then sends no request, or
    only part of its headers, is answered 408 and closed after `seconds`, so slow clients cannot
    hold connections (and file descriptors) forever. Body reads have their own --body-timeout."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    body = f"the request headers took longer than {seconds:g} s to arrive".encode()
    head = "HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    late = head.encode() + f"content-length: {len(body)}\r\n\r\n".encode() + body

    class HeaderTimeoutH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(seconds, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return  # the headers came; the request is the app's (and --body-timeout's) now
            if self.conn.our_state is h11.IDLE:
                self.transport.write(late)
            self.transport.close()

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutH11Protocol


# ----------------------------------------------------------------------------- `serve` verb


CONFIG, SHOW_CONFIG = ServeConfig, True


def main(cfg: ServeConfig) -> int:
    try:  # both, before the model loads
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise ClozeformerError("serving needs fastapi and uvicorn (pip install 'clozeformer[serve]')") from None
    pipes = build_pipelines(cfg)
    app = create_app(pipes, cfg, info={"model": model_name(cfg.model)})
    sock = bind(cfg.host, cfg.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"serving {', '.join(pipes)} from {cfg.model} on http://{shown}:{port}", flush=True)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level=cfg.log_level,
            timeout_graceful_shutdown=cfg.graceful_timeout,
            access_log=cfg.log_level == "debug",
            limit_concurrency=cfg.max_connections,
            timeout_keep_alive=cfg.keep_alive_timeout,
            http=header_timeout_protocol(cfg.header_timeout),
        )
    )
    server.run(sockets=[sock])
    sys.stdout.flush()
    return 0
