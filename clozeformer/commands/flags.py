"""Flags generated from typed dataclass configs (`clozeformer.utils.configs`).

Every stage has one dataclass config (`PretrainConfig`, `FinetuneConfig`, ...). Its fields
become `--flag-name` options (underscores -> dashes), its defaults are the only defaults,
and the one-line help comes from `field(metadata=flag_help(...))`. A `--config FILE`
(JSON, or YAML when PyYAML is installed) supplies values too; flags given on the command
line win over the file, the file wins over the dataclass defaults. Ranges (`min`/`max` in the
metadata) are checked by the config itself (`check_ranges`), for flags and Python alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from clozeformer.utils.configs import canonical_keys
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import json_object

T = TypeVar("T")
_UNSET = object()


def finite_float(text: str) -> float:
    """argparse type for float flags: a finite number (`--lr nan` or `--epochs inf` is a user error)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


def check_value(name: str, value: Any, annotation: Any) -> Any:
    """A config-file value checked against its field's annotation; returns it (ints accepted as floats).

    Raises ClozeformerError naming the option and the expected type. Flags never need this:
    argparse already parsed them with the field's type.
    """
    tp, optional = _base_type(annotation)
    if value is None:
        if optional:
            return None
        raise ClozeformerError(f"config file: {name} must not be null")

    def bad(expected: str) -> ClozeformerError:
        return ClozeformerError(f"config file: {name} must be {expected}, got {value!r}")

    if typing.get_origin(tp) is typing.Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise bad("one of " + ", ".join(map(repr, choices)))
        return value
    if tp is float:
        if type(value) not in (int, float) or not math.isfinite(value):
            raise bad("a finite number")
        return float(value)
    expected = {bool: "true or false", int: "an integer", str: "a string"}
    if tp in expected and type(value) is not tp:
        raise bad(expected[tp])
    if typing.get_origin(tp) in (list, tuple):
        inner = (typing.get_args(tp) or (str,))[0]
        if not isinstance(value, list) or not all(type(x) is inner for x in value):
            raise bad(f"a list of {getattr(inner, '__name__', inner)}")
    return value


def _base_type(tp: Any) -> tuple[Any, bool]:
    """(inner type, is_optional) of a field annotation such as `int | None`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else str), True
    return tp, False


#: the flags a user looks for first, listed first in --help (then the rest in the config's order)
FIRST = ("task", "model", "data", "input", "inputs", "index", "tokenizer", "out", "output")


class _OldName(argparse.Action):
    """A flag's old name (metadata `aliases`), accepted for one release with a note; hidden from --help."""

    def __call__(self, parser, namespace, values, option_string=None):
        new = "--" + self.dest.replace("_", "-")
        print(f"note: {option_string} is now {new}; the old name goes in the next release", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _help(f: dataclasses.Field, default: Any) -> str:
    """The field's help, marked (required), with its default unless the text already says it."""
    text = f.metadata.get("help", "")
    if f.metadata.get("required"):
        return f"{text} (required)"
    says_default = any(word in text for word in ("default", "unset"))
    if default is None or default == [] or says_default:
        return text
    return f"{text} (default: {default})"


def add_config_args(parser: argparse.ArgumentParser, cls: type, *, positional: tuple[str, ...] = ()) -> None:
    """A verb's flags: one per field of dataclass `cls` (defaults stay unset so a file can fill them),
    the usual first ones (`FIRST`) at the top, plus `--config FILE` (JSON/YAML of the same names).
    A field's `aliases` metadata keeps its old flag names working, hidden."""
    hints = typing.get_type_hints(cls)
    group = parser.add_argument_group(f"{cls.__name__} options")
    fields = sorted(dataclasses.fields(cls), key=lambda f: FIRST.index(f.name) if f.name in FIRST else len(FIRST))
    for f in fields:
        tp, _ = _base_type(hints[f.name])
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        choices = f.metadata.get("choices")
        if choices is None and typing.get_origin(tp) is typing.Literal:
            choices = list(typing.get_args(tp))
            tp = type(choices[0])
        pos = f.name in positional
        # SUPPRESS: an option not given leaves no attribute, so a config file can fill it, and the
        # help formatter does not print the placeholder (the help says the default)
        kw: dict[str, Any] = dict(help=_help(f, default), default=default if pos else argparse.SUPPRESS)
        if tp is bool:
            kw["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(tp) in (list, tuple):
            kw.update(nargs="*" if pos else "+", type=(typing.get_args(tp) or (str,))[0])
        else:
            kw.update(type={float: finite_float, int: int, str: str}.get(tp, str), choices=choices or None)
        # the dest of `--name-with-dashes` is argparse's own: name_with_dashes, the field's name
        group.add_argument(f.name if pos else "--" + f.name.replace("_", "-"), **kw)
        for old in f.metadata.get("aliases", ()):
            hidden = dict(kw, help=argparse.SUPPRESS, dest=f.name)
            if tp is not bool:
                hidden["action"] = _OldName
            group.add_argument("--" + old.replace("_", "-"), **hidden)
    parser.add_argument("--config", default=None, help=f"JSON/YAML file of {cls.__name__} values (the flags' names; flags win)")


def load_config_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ClozeformerError(f"{path}: no such config file")
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            raise ClozeformerError(f"{path}: reading YAML needs PyYAML (pip install pyyaml), or use JSON") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ClozeformerError(f"{path}: invalid YAML ({e})") from None
    else:
        data = json_object(text, str(path))
    if not isinstance(data, dict):
        raise ClozeformerError(f"{path}: expected a mapping of option names to values")
    return data


def config_from_args(cls: type[T], args: argparse.Namespace, defaults: dict[str, Any] | None = None) -> T:
    """A verb's config: `cls` defaults <- `defaults` (e.g. a model's saved settings) <- the
    --config file <- flags; every value type- and range-checked by `cls`."""
    file_values = dict(defaults or {})
    if getattr(args, "config", None):
        file_values.update(load_config_file(args.config))
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for k, v in canonical_keys(cls, file_values).items():
        if k not in names:
            raise ClozeformerError(f"config file: unknown option {k!r} for {cls.__name__}")
        values[k] = check_value(k, v, hints[k])
    for k in names:
        v = getattr(args, k, _UNSET)
        if v is not _UNSET:
            values[k] = v
    try:
        return cls(**values)  # type: ignore[call-arg]
    except TypeError as e:
        raise ClozeformerError(f"{cls.__name__}: {e}") from None
