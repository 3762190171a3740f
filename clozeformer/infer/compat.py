"""The request and response shapes of the APIs existing clients already speak, over our pipelines.

`clozeformer serve` answers them beside its own routes, so a client needs only a URL:

    HF Inference API   POST /hf/fill-mask, /hf/text-classification, /hf/feature-extraction,
                       /hf/question-answering, /hf/token-classification
                       {"inputs": ..., "parameters": {...}} -> the HF pipelines' output shapes;
                       huggingface_hub.InferenceClient(model="http://HOST:PORT/hf/fill-mask")
    text-embeddings-inference (TEI)
                       POST /tei/embed {"inputs", "normalize"} -> [[float]]
                       POST /tei/predict {"inputs"} -> [{"label", "score"}] (a list of them per input)
                       POST /tei/rerank {"query", "texts", "return_text"} -> [{"index", "score"}], best first
    OpenAI             POST /v1/embeddings {"input", "model", "encoding_format"} and GET /v1/models;
                       openai.OpenAI(base_url="http://HOST:PORT/v1", api_key="unused")

Each function here is pure: `parse_*` turns a body into (items, options) for a pipeline, or raises
BadRequest; `to_*` turns the pipeline's JSON results into the client's shape.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

#: the HF Inference API's task names (pipeline tags) -> ours
HF_TASKS = {
    "fill-mask": "fill-mask",
    "text-classification": "classify",
    "feature-extraction": "embed",
    "question-answering": "qa",
    "token-classification": "ner",
}


class BadRequest(ValueError):
    """A body this API does not accept (-> 422 with the message)."""


def _texts(inputs: Any, what: str = "inputs") -> tuple[list[Any], bool]:
    """(items, single): one text or a non-empty list of them."""
    if isinstance(inputs, str):
        return [inputs], True
    if isinstance(inputs, list) and inputs:
        return inputs, False
    raise BadRequest(f"'{what}' must be a text or a non-empty list of texts")


# ----------------------------------------------------------------------------- HF Inference API


def parse_hf(task: str, body: Any) -> tuple[list[Any], bool, dict]:
    """(pipeline items, single input?, parameters) of an HF Inference API body for `task`."""
    if not isinstance(body, dict) or "inputs" not in body:
        raise BadRequest('the body must be {"inputs": ..., "parameters": {...}}')
    params = body.get("parameters") or {}
    if not isinstance(params, dict):
        raise BadRequest("'parameters' must be an object")
    if task == "question-answering":
        inputs = body["inputs"]
        many = inputs if isinstance(inputs, list) else [inputs]
        if not many or not all(isinstance(x, dict) and "question" in x and "context" in x for x in many):
            raise BadRequest('question-answering inputs are {"question": ..., "context": ...} (or a list of them)')
        return [{"question": x["question"], "context": x["context"]} for x in many], not isinstance(inputs, list), params
    if task == "text-classification" and isinstance(body["inputs"], dict):  # {"text", "text_pair"}
        return [body["inputs"]], True, params
    items, single = _texts(body["inputs"])
    if task == "feature-extraction":  # the HF API also takes these at the top level (TEI-style)
        params = {**params, **{k: body[k] for k in ("normalize", "truncate") if k in body}}
    return items, single, params


def _ranked_labels(result: dict) -> list[dict]:
    """A classify result as HF and TEI list it: [{"label", "score"}] best first; a regression's value is the score."""
    if "value" in result:
        return [{"label": "LABEL_0", "score": result["value"]}]
    return [{"label": k, "score": v} for k, v in result["scores"].items()]


def _hf_fill(text: str, mask: dict, c: dict) -> dict:
    """A fill-mask candidate as HF reports it: "sequence" is the text with this mask filled, the others left [MASK]."""
    from clozeformer.infer.fill_mask import display

    token = display(c["token"])
    sequence = text[: mask["start"]] + token + text[mask["end"] :]
    return {"score": c["score"], "token": c["token_id"], "token_str": token, "sequence": sequence}


def to_hf(task: str, items: list[Any], results: list[dict], single: bool, params: dict) -> Any:
    """Our pipeline results -> the HF Inference API's response for `task`."""
    out: list[Any] = []
    for item, r in zip(items, results):
        if task == "fill-mask":
            top_k = int(params.get("top_k") or len(r["masks"][0]["candidates"]))
            per_mask = [[_hf_fill(item, m, c) for c in m["candidates"][:top_k]] for m in r["masks"]]
            out.append(per_mask[0] if len(per_mask) == 1 else per_mask)
        elif task == "text-classification":
            top_k = int(params["top_k"]) if "scores" in r and params.get("top_k") else None  # a regression's one value is not cut
            out.append(_ranked_labels(r)[:top_k])
        elif task == "feature-extraction":
            out.append(r["embedding"])
        elif task == "question-answering":
            out.append({k: r[k] for k in ("answer", "score", "start", "end")})
        else:  # token-classification
            keys = {"entity_group": "type", "score": "score", "word": "text", "start": "start", "end": "end"}
            out.append([{k: e[v] for k, v in keys.items()} for e in r["entities"]])
    if task == "text-classification":
        return out  # always a list per input, as the HF API answers
    return out[0] if single else out


# ----------------------------------------------------------------------------- text-embeddings-inference


def parse_tei_embed(body: Any) -> tuple[list[str], bool]:
    if not isinstance(body, dict) or "inputs" not in body:
        raise BadRequest('the body must be {"inputs": text or [texts], "normalize": true}')
    normalize = body.get("normalize", True)
    if not isinstance(normalize, bool):
        raise BadRequest("'normalize' must be true or false")
    return _texts(body["inputs"])[0], normalize


def parse_tei_predict(body: Any) -> tuple[list[Any], bool]:
    """TEI's /predict: a text, a [text, pair], or a list of either."""
    if not isinstance(body, dict) or "inputs" not in body:
        raise BadRequest('the body must be {"inputs": text, [text, pair] or a list of them}')
    inputs = body["inputs"]
    if isinstance(inputs, str):
        return [inputs], True
    if isinstance(inputs, list) and len(inputs) == 2 and all(isinstance(x, str) for x in inputs):
        return [tuple(inputs)], True  # one pair (TEI reads a 2-list of strings as a pair)
    if isinstance(inputs, list) and inputs:
        return [tuple(x) if isinstance(x, list) and len(x) == 2 else x for x in inputs], False
    raise BadRequest("'inputs' must be a text, a [text, pair] or a non-empty list of them")


def to_tei_predict(results: list[dict], single: bool) -> Any:
    out = [_ranked_labels(r) for r in results]
    return out[0] if single else out


def parse_tei_rerank(body: Any) -> tuple[str, list[str], bool]:
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        raise BadRequest('the body must be {"query": text, "texts": [texts]}')
    texts = body.get("texts")
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise BadRequest("'texts' must be a non-empty list of texts")
    return body["query"], texts, bool(body.get("return_text", False))


def to_tei_rerank(texts: list[str], scores: list[float], return_text: bool) -> list[dict]:
    """`scores`: each text's relevance (ClassifyPipeline.relevance), best first in the answer."""
    ranked = sorted(range(len(texts)), key=lambda i: -scores[i])
    return [{"index": i, "score": scores[i], **({"text": texts[i]} if return_text else {})} for i in ranked]


# ----------------------------------------------------------------------------- OpenAI


def parse_openai_embeddings(body: Any) -> tuple[list[str], str]:
    if not isinstance(body, dict) or "input" not in body:
        raise BadRequest('the body must be {"input": text or [texts], "model": name}')
    inputs = body["input"]
    if isinstance(inputs, list) and inputs and all(isinstance(x, int) or isinstance(x, list) for x in inputs):
        raise BadRequest("token-id inputs are not supported: send text")
    fmt = body.get("encoding_format") or "float"
    if fmt not in ("float", "base64"):
        raise BadRequest(f"encoding_format {fmt!r}: float or base64")
    if body.get("dimensions") is not None:
        raise BadRequest("'dimensions' is not supported: the model's hidden size is fixed")
    return _texts(inputs, "input")[0], fmt


def to_openai_embeddings(results: list[dict], model: str, fmt: str, tokens: int) -> dict:
    def encode(v: Any) -> Any:
        if fmt == "base64":  # little-endian float32, what the official client decodes
            return base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii")
        return [float(x) for x in v]

    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": encode(r["embedding"])} for i, r in enumerate(results)],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
