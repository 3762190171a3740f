"""The top layer: the command line and the verbs that orchestrate the rest.

    cli.py          `clozeformer <verb>`: the verb registry; parses, resolves, prints and runs; one-line errors
    flags.py        argparse flags generated from the typed configs; --config files
    prepare.py, tokenizer.py, pretrain.py, plot.py, push.py   the verbs of those names
    quickstart.py   the whole road in minutes on the bundled corpus
    experiments.py  BERT's claims, measured: pretrain + fine-tune arms through the library
    demo.py, info.py  save / reload / cross-check a small BERT; inspect a model directory

The other verbs live beside what they run: finetune/evaluate/predict in `tasks`, the prediction
verbs, search, serve and export in `infer`.
"""
