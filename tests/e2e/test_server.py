"""`clozeformer serve`: a real uvicorn process on 127.0.0.1 (port 0: the OS picks a free one and
the server prints it), good and bad requests, concurrent requests (micro-batched), and a
graceful SIGTERM that lets an in-flight request finish. QA and NER endpoints run in-process."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from synthetic import save_tiny

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from clozeformer.infer.pipelines import pipeline  # noqa: E402
from clozeformer.infer.server import ServeConfig  # noqa: E402
from clozeformer.modeling.bert import (  # noqa: E402
    BertForMaskedLM,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from clozeformer.modeling.tokenizer import Tokenizer  # noqa: E402
from clozeformer.utils.errors import ClozeformerError  # noqa: E402

pytestmark = pytest.mark.e2e  # subprocesses, kills, servers: the full suite, not the fast one

FIXTURES = Path(__file__).parents[1] / "fixtures"


class ServerProcess:
    """`python -m clozeformer serve ... --port 0` in a subprocess; `url` once it listens."""

    def __init__(self, model_dir: Path, *flags: str) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        cmd = [
            sys.executable,
            "-m",
            "clozeformer",
            "serve",
            "--model",
            str(model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--log-level",
            "warning",
            "--threads",
            "1",
            *flags,
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        self.pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append), daemon=True),
        ]
        for t in self.pumps:
            t.start()
        deadline = time.time() + 90
        self.url = None
        while self.url is None:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                self.stop()
                raise RuntimeError("server did not start: " + "".join(self.stderr)) from None
            m = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
        while True:  # the socket is bound before uvicorn starts; wait for the app
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("server never became healthy: " + "".join(self.stderr))
            time.sleep(0.1)

    def connect(self, data: bytes = b"") -> socket.socket:
        """A raw TCP connection to the server, `data` sent on it (a request, or part of one)."""
        host, port = self.url.removeprefix("http://").split(":")
        conn = socket.create_connection((host, int(port)), timeout=10)
        if data:
            conn.sendall(data)
        return conn

    def remaining_stdout(self) -> list[str]:
        """Lines printed after the start-up banner, once the process has exited."""
        self.pumps[0].join(timeout=10)
        out = []
        while not self.lines.empty():
            out.append(self.lines.get())
        return out

    @staticmethod
    def _pump(stream, sink) -> None:
        for line in stream:
            sink(line)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer((FIXTURES / "infer_vocab.txt").read_text(encoding="utf-8").split("\n")[:-1], do_lower_case=True)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, tok) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("serve_models")
    torch.manual_seed(0)
    return {
        "mlm": save_tiny(BertForMaskedLM, tok, root / "mlm"),
        "cls": save_tiny(BertForSequenceClassification, tok, root / "cls", id2label={0: "neg", 1: "pos"}),
        "qa": save_tiny(BertForQuestionAnswering, tok, root / "qa"),
        "ner": save_tiny(BertForTokenClassification, tok, root / "ner", id2label={0: "O", 1: "B-PER", 2: "I-PER"}),
    }


@pytest.fixture(scope="module")
def server(dirs):
    s = ServerProcess(
        dirs["mlm"],
        "--max-wait-ms",
        "50",
        "--max-items",
        "8",
        "--max-chars",
        "200",
        "--max-body-bytes",
        "5000",
        "--top-k",
        "3",
        "--max-length",
        "16",
    )
    yield s
    assert s.stop() in (0, -signal.SIGTERM)
    assert "Traceback" not in "".join(s.stderr)


def test_health_info_and_good_requests(server, dirs):
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    info = httpx.get(server.url + "/info").json()
    assert info["architecture"] == "BertForMaskedLM" and info["tasks"] == ["fill-mask", "embed"]
    assert info["limits"] == {"max_items": 8, "max_chars": 200, "max_body_bytes": 5000}
    texts = ["The cat sat on the [MASK].", "我昨天去了[MASK][MASK]，买了一件红色的外套。"]
    want = pipeline("fill-mask", dirs["mlm"], top_k=3, max_length=16)(texts)
    got = httpx.post(server.url + "/fill-mask", json={"inputs": texts}).json()["results"]
    assert [r["sequence"] for r in got] == [r["sequence"] for r in want]
    assert got[1]["masks"][1]["candidates"][0]["score"] == pytest.approx(want[1]["masks"][1]["candidates"][0]["score"])
    one = httpx.post(server.url + "/fill-mask", json={"inputs": texts[0], "top_k": 1}).json()["results"]
    assert len(one) == 1 and len(one[0]["masks"][0]["candidates"]) == 1
    emb = httpx.post(server.url + "/embed", json={"inputs": "good movie"}).json()["results"][0]["embedding"]
    assert len(emb) == 128 and sum(x * x for x in emb) == pytest.approx(1.0, abs=1e-4)
    long = httpx.post(server.url + "/fill-mask", json={"inputs": "[MASK] " + "the " * 40}).json()["results"][0]
    assert long["truncated"] is True


@pytest.mark.parametrize(
    "path, body, status, fragment",
    [
        ("/fill-mask", {"inputs": "no mask here"}, 422, "no [MASK]"),
        ("/fill-mask", {"inputs": ["a [MASK]", ""]}, 422, "text is empty"),
        ("/fill-mask", b"{not json", 422, "not valid JSON"),
        ("/fill-mask", b"\xff\xfe", 422, "not valid JSON"),
        ("/fill-mask", {"text": "a [MASK]"}, 422, "missing field 'inputs'"),
        ("/fill-mask", [1, 2], 422, "must be a JSON object"),
        ("/fill-mask", {"inputs": 5}, 422, "must be a string"),
        ("/fill-mask", {"inputs": []}, 422, "empty list"),
        ("/fill-mask", {"inputs": "[MASK]", "top_k": 10}, 422, "top_k must be"),
        ("/fill-mask", {"inputs": ["[MASK]"] * 9}, 413, "9 items"),
        ("/fill-mask", {"inputs": "[MASK] " + "x" * 300}, 413, "characters"),
        ("/embed", b'{"inputs": "' + b"a " * 3000 + b'"}', 413, "request body"),
        ("/classify", {"inputs": "good"}, 404, "no head for it"),
        ("/fill-mask", b'{"inputs": "a [MASK] \\ud800"}', 422, "unpaired UTF-16 surrogate"),
        ("/fill-mask", b'{"inputs": ["[MASK]", {"\\udfff": 1}]}', 422, "unpaired UTF-16 surrogate"),
        ("/fill-mask", b"[" * 40 + b"]" * 40, 422, "deeper than 32"),
        ("/fill-mask", b'{"inputs": "[MASK] [[[[ {{{{ \\" ]]"}', 200, None),  # brackets inside strings do not nest
    ],
)
def test_bad_requests_get_clear_4xx_json(server, path, body, status, fragment):
    if isinstance(body, bytes):
        r = httpx.post(server.url + path, content=body, headers={"content-type": "application/json"})
    else:
        r = httpx.post(server.url + path, json=body)
    assert r.status_code == status, r.text
    if fragment:
        assert fragment in r.json()["error"]


def test_hostile_bodies_never_500_and_keep_the_connection_usable(server):
    from clozeformer.infer.server import HTTPError, parse_body

    with pytest.raises(HTTPError, match="deeper than"):  # no RecursionError at any depth
        parse_body(b"[" * 100_000 + b"]" * 100_000)
    with httpx.Client(base_url=server.url) as client:  # one keep-alive connection throughout
        for body in (b'{"inputs": "\\ud800"}', b"{" * 50, b"\xff", b'{"inputs": "[MASK]"}'):
            r = client.post("/fill-mask", content=body, headers={"content-type": "application/json"})
            assert r.status_code in (200, 422), r.text
        assert r.status_code == 200  # the last, good request on the same connection


def test_unknown_route_and_method(server):
    assert httpx.post(server.url + "/translate", json={}).status_code == 404
    assert httpx.get(server.url + "/fill-mask").status_code == 405


def test_concurrent_requests_are_micro_batched(server, dirs):
    texts = [f"the {w} sat on the [MASK]." for w in ("cat", "dog", "big dog", "small cat", "red car", "book")]
    want = {t: r["sequence"] for t, r in zip(texts, pipeline("fill-mask", dirs["mlm"], top_k=3, max_length=16)(texts))}
    before = httpx.get(server.url + "/info").json()["stats"]["fill-mask"]
    n = 24
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def client(i: int) -> None:
        with httpx.Client(timeout=60) as c:
            barrier.wait()
            results[i] = c.post(server.url + "/fill-mask", json={"inputs": texts[i % len(texts)]})

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.status_code == 200 for r in results)
    for i, r in enumerate(results):
        assert r.json()["results"][0]["sequence"] == want[texts[i % len(texts)]]
    after = httpx.get(server.url + "/info").json()["stats"]["fill-mask"]
    requests, batches = after["requests"] - before["requests"], after["batches"] - before["batches"]
    assert requests == n
    assert batches < n, "concurrent requests were not batched together"


def test_sigterm_finishes_in_flight_requests(dirs):
    # A long collection window keeps the request in flight when SIGTERM arrives.
    s = ServerProcess(dirs["cls"], "--max-wait-ms", "3000")
    try:
        pair = httpx.post(s.url + "/classify", json={"inputs": [["good", "movie"]]}).json()["results"][0]
        assert pair["label"] in ("neg", "pos")
        box: dict = {}

        def slow_request() -> None:
            box["response"] = httpx.post(s.url + "/classify", json={"inputs": ["good movie", "bad"]}, timeout=60)

        t = threading.Thread(target=slow_request)
        started = time.time()
        t.start()
        while httpx.get(s.url + "/info").json()["stats"]["classify"]["in_flight"] == 0:  # wait until queued
            assert time.time() - started < 30
            time.sleep(0.05)
        s.proc.send_signal(signal.SIGTERM)
        t.join(timeout=60)
        assert box["response"].status_code == 200
        assert [r["label"] in ("neg", "pos") for r in box["response"].json()["results"]] == [True, True]
        assert time.time() - started >= 2.9  # it waited out its collection window, not cut short
        # uvicorn re-raises the signal after its graceful shutdown: "terminated by SIGTERM"
        assert s.proc.wait(timeout=30) in (0, -signal.SIGTERM)
        assert "stopped after serving 2 requests\n" in s.remaining_stdout()
        with pytest.raises(httpx.TransportError):
            httpx.get(s.url + "/health", timeout=2)
    finally:
        s.stop()
    assert "Traceback" not in "".join(s.stderr)


def test_qa_and_ner_endpoints_in_process(dirs):
    from fastapi.testclient import TestClient

    from clozeformer.infer.server import ServeConfig, build_pipelines, create_app

    for name, path, body, want_input in (
        (
            "qa",
            "/qa",
            {"question": "where?", "context": "john lives in paris"},
            [{"question": "where?", "context": "john lives in paris"}],
        ),
        ("ner", "/ner", {"inputs": ["John Smith lives in Paris.", "Mary"]}, ["John Smith lives in Paris.", "Mary"]),
    ):
        cfg = ServeConfig(model=str(dirs[name]))
        with TestClient(create_app(build_pipelines(cfg), cfg)) as client:
            got = client.post(path, json=body).json()["results"]
            assert got == json.loads(json.dumps(pipeline(name, dirs[name])(want_input)))
            bad = client.post(path, json={"inputs": [{"question": "x"}]} if name == "qa" else {"inputs": [" "]})
            assert bad.status_code == 422 and bad.json()["index"] == 0
            assert client.post("/fill-mask", json={"inputs": "[MASK]"}).status_code == 404


def test_cli_rejects_a_busy_port(dirs, capsys):
    from clozeformer.commands.cli import main as cli_main

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert cli_main(["serve", "--model", str(dirs["cls"]), "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the APIs clients already speak


@pytest.fixture
def local_clients(monkeypatch):
    """The suite runs with HF_HUB_OFFLINE=1, which makes huggingface_hub refuse every request; its
    client may talk to the server on 127.0.0.1 here (nothing else is contacted)."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


def test_hf_inference_api_openai_tei_and_metrics_with_real_clients(server, dirs, local_clients):
    """huggingface_hub.InferenceClient and the official openai client talk to `serve` unchanged;
    TEI's /embed answers its shape; /metrics is Prometheus text that counts what was served."""
    from huggingface_hub import InferenceClient

    openai = pytest.importorskip("openai")
    parser = pytest.importorskip("prometheus_client.parser")
    text = "the cat sat on the [MASK] ."
    ours = httpx.post(server.url + "/fill-mask", json={"inputs": text}).json()["results"][0]["masks"][0]["candidates"]
    got = InferenceClient(model=server.url + "/hf/fill-mask").fill_mask(text)
    assert [g.token for g in got] == [c["token_id"] for c in ours]
    assert [g.score for g in got] == pytest.approx([c["score"] for c in ours], abs=1e-6)
    assert got[0].sequence == text.replace("[MASK]", got[0].token_str)
    assert len(InferenceClient(model=server.url + "/hf/fill-mask").fill_mask(text, top_k=2)) == 2

    texts = ["good movie", "the cat sat on the mat"]
    want = np.array([r["embedding"] for r in httpx.post(server.url + "/embed", json={"inputs": texts}).json()["results"]])
    vec = InferenceClient(model=server.url + "/hf/feature-extraction").feature_extraction(texts[0])
    np.testing.assert_allclose(np.asarray(vec).reshape(-1), want[0], atol=1e-5)

    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    emb = client.embeddings.create(input=texts, model="tiny")  # the client asks for base64 by default
    np.testing.assert_allclose(np.array([d.embedding for d in emb.data]), want, atol=1e-5)
    assert emb.usage.prompt_tokens == sum(len(t.split()) + 2 for t in texts)
    assert [m.id for m in client.models.list().data] == [str(dirs["mlm"].resolve())]
    floats = client.embeddings.create(input="good movie", model="tiny", encoding_format="float")
    np.testing.assert_allclose(floats.data[0].embedding, want[0], atol=1e-5)

    tei = httpx.post(server.url + "/tei/embed", json={"inputs": texts}).json()
    np.testing.assert_allclose(np.array(tei), want, atol=1e-5)
    raw = np.array(httpx.post(server.url + "/tei/embed", json={"inputs": texts, "normalize": False}).json())
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), want, atol=1e-5)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    bad = httpx.post(server.url + "/v1/embeddings", json={"input": [[1, 2, 3]], "model": "tiny"})
    assert bad.status_code == 422 and "token-id inputs" in bad.json()["error"]
    assert httpx.post(server.url + "/tei/predict", json={"inputs": "x"}).status_code == 404  # no classifier head

    scraped = httpx.get(server.url + "/metrics")
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in parser.text_string_to_metric_families(scraped.text)
        for s in family.samples
    }
    assert samples[("clozeformer_requests_total", (("route", "/hf/fill-mask"), ("status", "200")))] >= 2
    assert samples[("clozeformer_requests_total", (("route", "/v1/embeddings"), ("status", "422")))] == 1
    assert samples[("clozeformer_batch_sequences_count", (("task", "embed"),))] >= 1
    assert ("clozeformer_in_flight", (("task", "fill-mask"),)) in samples


def test_classification_qa_and_ner_in_the_clients_shapes(dirs, local_clients):
    """text-classification through InferenceClient and TEI's /predict and /rerank on a classifier;
    QA and NER answers parsed by huggingface_hub's own output types."""
    from fastapi.testclient import TestClient
    from huggingface_hub import InferenceClient
    from huggingface_hub.inference._generated.types import (
        QuestionAnsweringOutputElement,
        TokenClassificationOutputElement,
    )

    from clozeformer.infer.server import ServeConfig, build_pipelines, create_app

    s = ServerProcess(dirs["cls"])
    try:
        ours = httpx.post(s.url + "/classify", json={"inputs": "a gripping film"}).json()["results"][0]["scores"]
        got = InferenceClient(model=s.url + "/hf/text-classification").text_classification("a gripping film")
        assert {g.label: g.score for g in got} == pytest.approx(ours, abs=1e-6)
        pred = httpx.post(s.url + "/tei/predict", json={"inputs": ["a gripping film", "dull", "the cat sat"]}).json()
        assert len(pred) == 3 and {p["label"] for p in pred[0]} == {"neg", "pos"}
        # as in TEI, two strings are one pair, not a batch of two
        pair = httpx.post(s.url + "/tei/predict", json={"inputs": ["film", "a gripping film"]}).json()
        want = httpx.post(s.url + "/classify", json={"inputs": [["film", "a gripping film"]]}).json()["results"][0]["scores"]
        assert {p["label"]: p["score"] for p in pair} == pytest.approx(want, abs=1e-6)
        texts = ["a gripping film", "dull", "the cat sat"]
        ranked = httpx.post(s.url + "/tei/rerank", json={"query": "film", "texts": texts, "return_text": True}).json()
        pos = [
            r["scores"]["pos"]
            for r in httpx.post(s.url + "/classify", json={"inputs": [["film", t] for t in texts]}).json()["results"]
        ]
        assert [r["index"] for r in ranked] == sorted(range(3), key=lambda i: -pos[i])
        assert [r["score"] for r in ranked] == pytest.approx(sorted(pos, reverse=True), abs=1e-6)
        assert ranked[0]["text"] == texts[ranked[0]["index"]]
    finally:
        assert s.stop() in (0, -signal.SIGTERM)
    for name, tag, body, parse in (
        (
            "qa",
            "question-answering",
            {"inputs": {"question": "where?", "context": "john lives in paris"}},
            QuestionAnsweringOutputElement.parse_obj_as_instance,
        ),
        (
            "ner",
            "token-classification",
            {"inputs": "John Smith lives in Paris."},
            TokenClassificationOutputElement.parse_obj_as_list,
        ),
    ):
        cfg = ServeConfig(model=str(dirs[name]))
        with TestClient(create_app(build_pipelines(cfg), cfg)) as client:
            response = client.post(f"/hf/{tag}", json=body)
            assert response.status_code == 200, response.text
            parsed = parse(response.content)
            if name == "qa":
                ours = client.post("/qa", json=body["inputs"]).json()["results"][0]
                assert (parsed.answer, parsed.start, parsed.end) == (ours["answer"], ours["start"], ours["end"])
            else:
                ours = client.post("/ner", json=body).json()["results"][0]["entities"]
                assert [(p.entity_group, p.word, p.start) for p in parsed] == [(e["type"], e["text"], e["start"]) for e in ours]
            assert client.post(f"/hf/{tag}", json={"text": "no inputs"}).status_code == 422


def test_clients_that_never_finish_their_headers_are_cut_off(dirs):
    """uvicorn has no header deadline: without one, a client that connects and sends nothing, or
    half its headers, holds a connection forever. With --header-timeout each gets 408 and is
    closed; an ordinary client is served meanwhile, and a keep-alive connection that is used
    again in time keeps working."""
    s = ServerProcess(dirs["mlm"], "--header-timeout", "1.5")
    try:
        silent = [s.connect() for _ in range(10)]
        partial = [s.connect(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: appl") for _ in range(10)]
        t0 = time.time()
        with httpx.Client(timeout=10) as client:  # one keep-alive connection, used twice within the deadline
            assert client.post(s.url + "/embed", json={"inputs": "good movie"}).status_code == 200
            assert time.time() - t0 < 1.0
            time.sleep(0.5)
            assert client.post(s.url + "/embed", json={"inputs": "bad movie"}).status_code == 200
        for c in silent + partial:
            answer = b""
            while chunk := c.recv(4096):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408") and answer.endswith(b"longer than 1.5 s to arrive")
            c.close()
        assert 1.0 < time.time() - t0 < 10
    finally:
        assert s.stop() in (0, -signal.SIGTERM)
    assert "Traceback" not in "".join(s.stderr)


def test_clients_that_leave_mid_body_are_handled_quietly(dirs):
    """Clients that announce a body, send part of it and disconnect: no "Exception in ASGI
    application" traceback in the log, and the server goes on serving."""
    s = ServerProcess(dirs["mlm"])
    try:
        for _ in range(20):
            c = s.connect(b'POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"in')
            time.sleep(0.02)
            c.close()
        time.sleep(0.5)
        assert httpx.post(s.url + "/embed", json={"inputs": "good movie"}, timeout=10).status_code == 200
    finally:
        assert s.stop() in (0, -signal.SIGTERM)
    log = "".join(s.stderr)
    assert "Traceback" not in log and "Exception in ASGI" not in log


def test_slow_clients_are_cut_off_and_do_not_block_others(dirs):
    """A flood of clients that send headers and then trickle their bodies (slowloris): each gets
    408 after --body-timeout, and an ordinary request meanwhile is answered at once."""
    s = ServerProcess(dirs["mlm"], "--body-timeout", "1.5")
    try:
        headers = b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        slow = [s.connect(headers + b"{") for _ in range(30)]
        t0 = time.time()
        ok = httpx.post(s.url + "/embed", json={"inputs": "good movie"}, timeout=10)
        assert ok.status_code == 200 and time.time() - t0 < 1.0
        for c in slow:
            answer = b""
            while True:  # the head, then as many body bytes as it announces
                head, _, body = answer.partition(b"\r\n\r\n")
                length = re.search(rb"content-length: (\d+)", head)
                if length and len(body) >= int(length.group(1)):
                    break
                chunk = c.recv(4096)
                if not chunk:
                    break
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408") and b"longer than 1.5 s" in answer
            c.close()
        assert time.time() - t0 < 10
    finally:
        assert s.stop() in (0, -signal.SIGTERM)
    assert "Traceback" not in "".join(s.stderr)


@pytest.mark.parametrize("flag", ["header_timeout", "body_timeout", "keep_alive_timeout"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan")])
def test_timeouts_must_be_positive(flag, value):
    with pytest.raises(ClozeformerError, match=f"--{flag.replace('_', '-')} must be > 0 seconds"):
        ServeConfig(model="m", **{flag: value})
