"""`clozeformer <verb>`: one subcommand per stage of the road.

Each verb lives in the module that implements it (only the chosen one is imported, so
`clozeformer --help` is instant), which declares:

- `CONFIG`: its dataclass config, whose fields become the flags (`POSITIONAL`: the positional ones);
- `main(cfg)`: the verb, run on the resolved config (`config_from_args`: defaults <- `DEFAULTS(args)`
  when the module has it, e.g. a fine-tuned model's saved settings <- --config <- flags), printed
  first if `SHOW_CONFIG`; returns the exit status (not an int: 0);
- optionally `add_arguments(parser)`: builds the parser instead (sub-actions, shorthands).
  Without a `CONFIG` (demo, info), `main` gets the parsed `argparse.Namespace`.

User mistakes raise `ClozeformerError`, printed as one line (`error: ...`) with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from clozeformer import __version__
from clozeformer.commands.flags import add_config_args, config_from_args
from clozeformer.utils.configs import print_config
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.procs import bounded_heap

#: verb -> (module, one-line help). The registry of the CLI; modules are imported lazily.
COMMANDS: dict[str, tuple[str, str]] = {
    "quickstart": (
        "clozeformer.commands.quickstart",
        "the whole road in minutes on the bundled corpus: vocab, pretrain, cloze, fine-tune",
    ),
    "experiment": (
        "clozeformer.commands.experiments",
        "test BERT's claims: pretrain-vs-scratch, mlm-vs-clm, mlm-vs-rtd (ELECTRA), nsp-ablation",
    ),
    "demo": ("clozeformer.commands.demo", "build a tiny BERT, save it, reload it here and in transformers"),
    "tokenizer": ("clozeformer.commands.tokenizer", "tokenizer actions: `tokenizer train` learns a WordPiece vocab from corpora"),
    "prepare": ("clozeformer.commands.prepare", "tokenize corpora into packed or NSP pretraining shards"),
    "pretrain": (
        "clozeformer.commands.pretrain",
        "pretrain BERT: MLM, MLM+NSP, ELECTRA or left-to-right (clm); checkpoints, exact resume, torchrun",
    ),
    "plot": ("clozeformer.commands.plot", "draw a run's loss / accuracy / lr / throughput curves as PNGs"),
    "finetune": (
        "clozeformer.tasks.finetune",
        "fine-tune on GLUE, SQuAD, CMRC, CoNLL-2003, SWAG or your own data; sentence embeddings (bi-encoders)",
    ),
    "evaluate": ("clozeformer.tasks.evaluate", "score a fine-tuned model with the task's official metrics"),
    "predict": ("clozeformer.tasks.predict", "write predictions: GLUE submission TSVs, SQuAD JSON, CoNLL columns"),
    "info": ("clozeformer.commands.info", "show what a model directory holds and check that it loads"),
    "fill-mask": ("clozeformer.infer.fill_mask", "predict the words at [MASK] (top-k with probabilities)"),
    "classify": ("clozeformer.infer.classify", "label texts or text pairs with a fine-tuned classifier"),
    "embed": ("clozeformer.infer.embed", "sentence embeddings (cls, mean, max or last pooling), or build a search index"),
    "search": ("clozeformer.infer.index", "find the nearest texts in an embedding index, optionally reranked by a cross-encoder"),
    "qa": ("clozeformer.infer.qa", "extract the answer to a question from a context"),
    "ner": ("clozeformer.infer.ner", "named entities with types, scores and character spans"),
    "serve": ("clozeformer.infer.server", "HTTP server for the model's tasks (FastAPI, micro-batching)"),
    "export": ("clozeformer.infer.onnx_export", "export a model directory to ONNX (fp32 or int8 weights), checked against torch"),
    "push": ("clozeformer.commands.push", "upload a model directory to the Hugging Face Hub, with its model card"),
}


def _top_parser() -> argparse.ArgumentParser:
    epilog = "verbs:\n" + "\n".join(f"  {v:<12} {h}" for v, (_, h) in COMMANDS.items())
    p = argparse.ArgumentParser(
        prog="clozeformer",
        description="BERT end to end: WordPiece vocab, pretraining shards, cloze pretraining, "
        "fine-tuning, evaluation and inference.",
        epilog=epilog + "\n\n`clozeformer VERB --help` shows a verb's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"clozeformer {__version__}")
    p.add_argument("verb", nargs="?", choices=list(COMMANDS), metavar="VERB", help="what to do")
    return p


def verb_parser(verb: str) -> tuple[Any, argparse.ArgumentParser]:
    """The verb's module (imported now) and its argument parser."""
    module_name, help_ = COMMANDS[verb]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"clozeformer {verb}", description=help_)
    if hasattr(module, "add_arguments"):
        module.add_arguments(parser)
    else:
        add_config_args(parser, getattr(module, "CONFIG", None), positional=getattr(module, "POSITIONAL", ()))
    return module, parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = _top_parser()
    if not argv:
        top.print_help()
        return 0
    if argv[0] not in COMMANDS:
        if argv[0].startswith("-"):
            top.parse_args(argv)  # --help / --version exit here; anything else is an argparse error
        print(
            f"error: unknown verb {argv[0]!r}; choose one of {', '.join(COMMANDS)} (clozeformer --help lists them)",
            file=sys.stderr,
        )
        return 2
    verb = argv[0]
    module, parser = verb_parser(verb)
    config = getattr(module, "CONFIG", None)
    args = parser.parse_args(argv[1:])
    bounded_heap()  # this process owns the allocator: memory freed by training goes back to the system
    try:
        if config is not None:
            defaults = module.DEFAULTS(args) if hasattr(module, "DEFAULTS") else None
            args = config_from_args(config, args, defaults)
            if getattr(module, "SHOW_CONFIG", False):
                print_config(args)
        status = module.main(args)
        return status if isinstance(status, int) else 0
    except ClozeformerError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception:  # not a user mistake (those are ClozeformerError): a bug, shown in full
        import traceback

        traceback.print_exc()
        print(
            f"error: internal error in `clozeformer {verb}` (a bug, not your input): please report it with "
            "the command line and the traceback above",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
