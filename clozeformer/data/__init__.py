"""Text -> tokens -> shards -> masked batches.

    readers.py   corpus formats (BERT, paragraphs, lines, JSONL, WikiExtractor, WikiText; gzip),
                 sentence splitting, filters
    prepare.py   `clozeformer prepare`: packed or NSP sequences in memory-mappable shards
    manifest.py  Manifest: the typed manifest.json that prepare writes and the loader reads
    masking.py   vectorized cloze masking (Bernoulli or exact count, whole-word), counter-based RNG
    loader.py    PretrainLoader: seeded shuffle, rank split, dynamic masking, exact resume
    cli.py       the `prepare` verb; tokenizer_cli.py the `tokenizer train` verb

Submodules are imported on use, so `import clozeformer.data` is cheap.
"""
