"""Inference: pipelines (fill-mask, classify, embed, qa, ner), an embedding index, an HTTP server
and ONNX export.

    pipelines.py  `pipeline(task, model=DIR)`: the factory and the shared batch loop
    fill_mask.py / classify.py / embed.py / qa.py / ner.py   one task each (+ its CLI verb)
    backends.py   load an HF-format directory; run it in PyTorch or ONNX Runtime
    index.py      embedding index on disk (.npy + JSONL) and the `search` verb
    server.py     FastAPI app with micro-batching; the `serve` verb
    onnx_export.py  export with dynamic axes, parity check; the `export` verb
    compat.py     the HF Inference API, text-embeddings-inference and OpenAI request/response shapes
    options.py    what the prediction verbs and serve share: RunnerOptions, reading inputs, writing results

Nothing heavy is imported here; `clozeformer.pipeline` resolves to `pipelines.pipeline`.
"""
