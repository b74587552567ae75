"""The house rules, read from the source: layers only point down, no import cycles, small modules.

topology <- layouts <- algorithms <- bench. Every import counts, function-level ones included;
the only exception is an algorithm module's ``if __name__ == "__main__":`` entry point.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("topology", "layouts", "algorithms", "bench")
# what each package may import from the project (besides itself)
ALLOWED = {
    "topology": set(),
    "layouts": {"topology"},
    "algorithms": {"topology", "layouts"},
    "bench": {"topology", "layouts", "algorithms"},
}
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def _is_main_block(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return (
        isinstance(node, ast.If)
        and isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
    )


def _imports(name: str, path: Path) -> set[str]:
    """Project modules ``name`` imports anywhere in its file (outside a __main__ block)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _is_main_block(node):
            return
        if isinstance(node, ast.Import):
            found.update(_resolve(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else _resolve(base))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m and m in MODULES and m != name}


def _resolve(dotted: str) -> str:
    while dotted and dotted not in MODULES:
        dotted = dotted.rpartition(".")[0]
    return dotted


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_layers_only_point_down(name):
    own = name.split(".")[0]
    bad = sorted(m for m in GRAPH[name] if m.split(".")[0] not in ALLOWED[own] | {own})
    assert not bad, f"{name} imports {bad}: {own} may import only {sorted(ALLOWED[own])}"


def test_bench_commands_do_not_import_each_other():
    commands = {m for m in MODULES if m.startswith("bench.") and m.endswith("_cmd")}
    for name in commands:
        assert not GRAPH[name] & commands, f"{name} imports {sorted(GRAPH[name] & commands)}"


def test_no_import_cycles():
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for dep in sorted(GRAPH[name]):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep) :] + [dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[name] = 2

    for name in sorted(MODULES):
        if name not in state:
            visit(name)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_small(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, (
        f"{MODULES[name].relative_to(ROOT)} has {lines} lines (> {MAX_LINES})"
    )


def test_the_checker_sees_a_cycle(tmp_path):
    """The resolver maps relative imports the way Python does (guards the tests above)."""
    assert _resolve("algorithms.comm.Comm") == "algorithms.comm"
    assert "algorithms.plan" in GRAPH["algorithms.cannon"]
