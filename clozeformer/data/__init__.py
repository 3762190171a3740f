"""Text -> tokens -> shards -> masked batches.

    readers.py   corpus formats (BERT, paragraphs, lines, JSONL, WikiExtractor, WikiText; gzip),
                 sentence splitting, filters
    prepare.py   `clozeformer prepare`: packed or NSP sequences in memory-mappable shards
    manifest.py  Manifest: the typed manifest.json that prepare writes and the loader reads
    masking.py   vectorized cloze masking (Bernoulli or exact count, whole-word), counter-based RNG
    loader.py    PretrainLoader: seeded shuffle, rank split, dynamic masking, exact resume
    padding.py   right padding + length-grouped batch order (pretraining, fine-tuning, inference)
    spans.py     QA and NER windows and decoders, one path for evaluation and serving

The `prepare` and `tokenizer train` verbs are `clozeformer/commands/`.

Submodules are imported on use, so `import clozeformer.data` is cheap.
"""
