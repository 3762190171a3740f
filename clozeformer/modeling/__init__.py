"""The model and what defines it on disk: above utils and hub, below everything that trains or runs it.

config.py     BertConfig (HF config.json field names, bert or roformer) and the tiny..large presets
bert.py       embeddings -> attention -> FFN -> encoder -> pooler -> every head; `pool`
rotary.py     rotary position tables (RoFormer)
electra.py    ELECTRA's generator + discriminator (replaced-token detection)
hf_format.py  the one key map to HF/Google names; from_pretrained / save_pretrained
tokenizer.py  WordPiece on `tokenizers`: Google vocabs exactly, offsets, word ids, training
sbert.py      sentence-transformers directories: the pooling modules read and written
card.py       model cards (README.md) for the Hub
"""
