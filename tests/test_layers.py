"""The package's shape, measured from its source: which module imports which (every import:
at module level, under ``TYPE_CHECKING`` and inside functions), the circles those imports
form, who names ``App``, and how long modules and functions grow.

Run as a script it prints the layers (each package and what it imports at load time) and
every circle::

    .venv/bin/python tests/test_layers.py
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SOURCE / "conveyor"

MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 100
MAX_CIRCLE = 2  # two modules that import each other lazily can be one idea split in two
NAMES_APP = {"conveyor.app", "conveyor"}  # App's module and the package that exports it


@dataclass(frozen=True)
class Import:
    """``source`` imports ``target`` (both dotted module names); ``when``: ``load`` (module
    level), ``typing`` (under ``TYPE_CHECKING``) or ``call`` (inside a function)."""

    source: str
    target: str
    names: tuple[str, ...]
    when: str
    line: int


def module_names() -> dict[str, Path]:
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, when: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement under ``tree`` with when it runs."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, when
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _imports(node, "call")
        elif isinstance(node, ast.If) and _is_type_checking(node.test) and when == "load":
            for child in node.body:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), "typing")
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), "load")
        else:
            yield from _imports(node, when)


def imports() -> list[Import]:
    """Every import from one of the package's modules of another."""
    modules = module_names()
    found = []
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        for node, when in _imports(tree, "load"):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        found.append(Import(name, alias.name, (), when, node.lineno))
                continue
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                if target in modules and target != name:
                    found.append(Import(name, target, (alias.name,), when, node.lineno))
    return found


def circles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), largest first."""
    graph: dict[str, set[str]] = defaultdict(set)
    for edge in edges:
        graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10_000)

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in list(graph):
        if node not in index:
            visit(node)
    return sorted(groups, key=len, reverse=True)


def names_app(edges: list[Import]) -> list[str]:
    """Modules outside app.py, the package's ``__init__`` and the CLI that import ``App``."""
    allowed = {"conveyor", "conveyor.app"}
    return sorted(
        {
            f"{edge.source}:{edge.line}"
            for edge in edges
            if edge.target in NAMES_APP
            and ("App" in edge.names or (edge.target == "conveyor.app" and not edge.names))
            and edge.source not in allowed
            and not edge.source.startswith("conveyor.cli")
        }
    )


def long_modules() -> list[str]:
    return sorted(
        f"{name} ({lines} lines)"
        for name, path in module_names().items()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    )


def long_functions() -> list[str]:
    found = []
    for name, path in module_names().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{name}.{node.name} ({lines} lines)")
    return sorted(found)


def test_the_graph_sees_every_kind_of_import() -> None:
    sample = ast.parse(
        "import conveyor.a\n"
        "if TYPE_CHECKING:\n    from conveyor.b import B\n"
        "def f():\n    from conveyor.c import C\n"
        "class K:\n    def m(self):\n        import conveyor.d\n"
    )
    found = [(node.lineno, when) for node, when in _imports(sample, "load")]
    assert found == [(1, "load"), (3, "typing"), (5, "call"), (8, "call")]
    assert {edge.when for edge in imports()} == {"load", "typing", "call"}


def test_no_import_circle_spans_more_than_two_modules() -> None:
    assert [group for group in circles(imports()) if len(group) > MAX_CIRCLE] == []


def test_no_module_outside_app_init_and_cli_names_app() -> None:
    assert names_app(imports()) == []


def test_no_module_over_700_lines() -> None:
    assert long_modules() == []


def test_no_function_over_100_lines() -> None:
    assert long_functions() == []


LAYOUT_PAGE = SOURCE.parent / "docs" / "development" / "index.md"
LAYOUT_BEGIN = "<!-- layout: python tests/test_layers.py --layout -->"
LAYOUT_END = "<!-- /layout -->"
_OUTSIDE = (
    ("tests/unit/", "pure logic, no broker (mirrors src/conveyor)"),
    ("tests/integration/", "against a real Kafka broker the project starts (mirrors the parts)"),
    ("tests/test_*.py", "the public API, modules importable alone, typing, these layers"),
    ("tests/soak/", "make soak: the whole product under random faults on a local cluster"),
    ("bench/", "benchmark scripts beside bare confluent-kafka loops (make bench)"),
    ("examples/", "the example app that make run runs"),
    ("docs/", "the documentation site (make docs): guides, operations, the generated reference"),
)


def _summary(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    text = " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split())
    text = re.sub(r":(?:class|mod|func|meth|attr):`~?([^`]+)`", r"\1", text).replace("``", "")
    ends = [at for at in (text.find(". "), text.find("? ")) if at > 0]
    return text[: min(ends) + (text[min(ends)] == "?")] if ends else text.rstrip(".")


def layout(width: int = 100) -> str:
    """The repository's layout as the docs show it (docs/development/index.md): each part of the package (a
    subpackage or a module of its own) with the first sentence of its docstring."""
    rows = []
    for path in sorted(PACKAGE.iterdir()):
        if path.is_dir() and (path / "__init__.py").exists():
            rows.append((f"  {path.name}/", _summary(path / "__init__.py")))
        elif path.suffix == ".py" and not path.name.startswith("_"):
            rows.append((f"  {path.name}", _summary(path)))
    rows = [("src/conveyor/", "the package (src layout, typed: py.typed, mypy --strict)"), *rows,
            *_OUTSIDE]  # fmt: skip
    lines = []
    for name, text in rows:
        words, line = text.split(), f"{name:21}"
        for word in words:
            if len(line) + 1 + len(word) > width and line.strip() != name.strip():
                lines.append(line.rstrip())
                line = " " * 21
            line += ("" if line.endswith(" ") else " ") + word
        lines.append(line.rstrip())
    return "\n".join(lines) + "\n"


def test_the_docs_show_the_layout_of_the_tree() -> None:
    text = LAYOUT_PAGE.read_text()
    begin, end = text.index(LAYOUT_BEGIN), text.index(LAYOUT_END)
    shown = text[begin + len(LAYOUT_BEGIN) : end].strip().removeprefix("```").removesuffix("```")
    assert shown.strip("\n") == layout().strip("\n"), (
        "the docs' layout is not the tree's: python tests/test_layers.py --layout"
    )


def layers(edges: list[Import]) -> dict[str, set[str]]:
    """Each package (``conveyor.web``...) and the packages its modules import at load time."""

    def package(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if len(parts) > 1 else module

    found: dict[str, set[str]] = defaultdict(set)
    for edge in edges:
        if edge.when == "load" and package(edge.source) != package(edge.target):
            found[package(edge.source)].add(package(edge.target))
    return found


if __name__ == "__main__":
    if sys.argv[1:] == ["--layout"]:
        print(f"{LAYOUT_BEGIN}\n```\n{layout()}```\n{LAYOUT_END}")
        raise SystemExit(0)
    edges = imports()
    for source, targets in sorted(layers(edges).items()):
        short = sorted(t.removeprefix("conveyor.") for t in targets)
        print(f"{source.removeprefix('conveyor.'):16} -> {', '.join(short)}")
    groups = circles(edges)
    print(f"\n{len(groups)} circles; sizes {[len(g) for g in groups]}")
    for group in groups:
        print(" ", ", ".join(group))
    print(f"\nnaming App: {len(names_app(edges))}", *names_app(edges), sep="\n  ")
    print("\nlong modules:", *long_modules(), sep="\n  ")
    print("\nlong functions:", *long_functions(), sep="\n  ")
