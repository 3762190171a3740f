"""The package's folders are its architecture: each layer imports only the layers below it.

    utils < hub < modeling < data < train < tasks, infer < commands (< __main__)

Every `import` in every module of `clozeformer/` is read from the source (the AST, so imports
inside functions count too); an import of a higher layer, an import between the two packages of
one layer (tasks and infer), or a cycle between modules fails this test. The package's root
(`clozeformer/__init__.py`: the version and the lazy public names) sits below everything.
docs/ARCHITECTURE.md draws the same map.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "clozeformer"

#: layer of each top-level part of the package, lowest first; equal numbers: siblings
LAYERS = {"utils": 0, "hub": 1, "modeling": 2, "data": 3, "train": 4, "tasks": 5, "infer": 5, "commands": 6, "__main__": 7}


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports_of(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The clozeformer modules `path` imports, anywhere in it (relative imports resolved)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t.split(".")[0] == "clozeformer")
    return found - {name}


def part(name: str) -> str | None:
    """The layer part of a module name (None: the package root)."""
    pieces = name.split(".")
    return pieces[1] if len(pieces) > 1 else None


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(path, name, known) for name, path in known.items()}


def test_every_part_of_the_package_has_a_layer():
    assert {part(n) for n in modules()} - {None} == set(LAYERS)


def test_no_import_points_up_or_sideways():
    wrong = []
    for name, targets in graph().items():
        src = part(name)
        for target in targets:
            dst = part(target)
            if src is None or dst is None or src == dst:
                continue  # the root below everything; a part importing itself
            if LAYERS[dst] >= LAYERS[src]:
                wrong.append(f"{name} -> {target} ({src}: layer {LAYERS[src]}, {dst}: layer {LAYERS[dst]})")
    assert not wrong, "imports against the layer order:\n" + "\n".join(sorted(wrong))


def test_no_import_cycles():
    g = graph()
    state: dict[str, int] = {}  # 1 visiting, 2 done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(g.get(node, ())):
            if nxt not in g:
                continue
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(g):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_checker_sees_imports_inside_functions(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from clozeformer.commands import cli\n    import clozeformer.hub\n")
    got = imports_of(path, "clozeformer.modeling.m", {"clozeformer.commands.cli": path})
    assert got == {"clozeformer.commands.cli", "clozeformer.hub"}
