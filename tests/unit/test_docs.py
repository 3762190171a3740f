"""The documents stay true: the README is short, every `clozeformer` command in the README and the
guides parses with the verb's real flags, the README's Python example runs as written, its test
command is what CI runs, and docs/ARCHITECTURE.md's file map lists every file it should."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from clozeformer.commands.cli import COMMANDS, verb_parser

REPO = Path(__file__).resolve().parents[2]
GUIDES = ["README.md", "CONTRIBUTING.md", *(str(p.relative_to(REPO)) for p in sorted((REPO / "docs").glob("*.md")))]
GUIDES.remove("docs/EXPERIMENTS.md")  # the runs keep the commands of their day (old flag names are aliases)


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def clozeformer_commands(text: str) -> list[list[str]]:
    """Every `clozeformer VERB ...` (also after `-m clozeformer`) in the bash blocks, continuation lines
    joined and chains split; commands with `...` placeholders are left out."""
    commands = []
    for block in code_blocks(text, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#", 1)[0]
            for part in re.split(r"&&|;|\|\||&(?!\S)", line):
                words = shlex.split(part)
                if "..." in part or not words:
                    continue
                if "clozeformer" in words:
                    at = words.index("clozeformer")
                    if at == 0 or words[at - 1] == "-m":
                        commands.append(words[at + 1 :])
    return commands


def test_the_readme_is_short_and_its_test_command_is_cis():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert ci in readme  # the README's test command is exactly what CI runs
    assert 'pip install -e ".[plot]" && clozeformer quickstart' in readme  # the main job installs only what it needs


@pytest.mark.parametrize("doc", GUIDES)
def test_every_command_in_the_docs_parses(doc, capsys):
    commands = clozeformer_commands((REPO / doc).read_text(encoding="utf-8"))
    for argv in commands:
        verb = argv[0]
        assert verb in COMMANDS, f"{doc}: unknown verb in `clozeformer {' '.join(argv)}`"
        _, parser = verb_parser(verb)
        try:
            parser.parse_args(argv[1:])
        except SystemExit as e:
            pytest.fail(f"{doc}: `clozeformer {' '.join(argv)}` does not parse ({e}): {capsys.readouterr().err.strip()}")
    assert "note:" not in capsys.readouterr().err, f"{doc} uses an old flag name"


def test_the_docs_have_commands_to_check():
    assert len(clozeformer_commands((REPO / "README.md").read_text(encoding="utf-8"))) >= 12


def test_the_readmes_python_example_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (example,) = code_blocks((REPO / "README.md").read_text(encoding="utf-8"), "python")
    assert len(example.strip().splitlines()) <= 6
    exec(compile(example, "README.md", "exec"), {})
    assert "token" in capsys.readouterr().out


def test_the_architecture_page_lists_every_file():
    listed = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    files = [p for folder in ("clozeformer", "benchmarks", "tools") for p in (REPO / folder).rglob("*.py")]
    files += list((REPO / "docs").glob("*.md")) + [REPO / "CONTRIBUTING.md"]
    missing = [str(p.relative_to(REPO)) for p in files if str(p.relative_to(REPO)) not in listed]
    assert not missing, f"not in docs/ARCHITECTURE.md: {missing}"
