"""The package's shape, measured from its source: which module imports which (every import:
at module level, under ``TYPE_CHECKING`` and inside functions), the circles those imports
form, who names ``App``, how long modules and functions grow, which features read sideways,
how often a module uses another object's private members across a package boundary, and
how many lines are laid out by hand (``# fmt: skip``).

Run as a script it prints the layers (each package and what it imports at load time), every
circle, the private reads across packages file by file and the counts the ratchets hold::

    .venv/bin/python tests/test_layers.py

Private reads across packages are counted by name, not by the class of the object read (an
ast pass cannot know it): see :func:`private_reads` for the approximation.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tokenize
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

# Issue 57 ("collaborators instead of halves") is done when the package has at most 3 import
# circles, all of two modules, at most 10 uses of another object's private members across a
# package boundary, and fewer than 60 lines laid out by hand. The ratchets hold what has been
# reached so far: lower one whenever the count falls (never raise it); at the target, the
# target holds.
TARGET_CIRCLES = 3
TARGET_PRIVATE_READS_ACROSS = 10
TARGET_FMT_SKIPS = 59  # fewer than 60
RATCHET_CIRCLES = 3
RATCHET_PRIVATE_READS_ACROSS = 4
RATCHET_FMT_SKIPS = 3

SIDEWAYS = {
    "conveyor.models": {"conveyor.errors"},  # a leaf: model libraries are recognised, not imported
}
"""Packages that may import nothing of the package but these (and themselves)."""
NOT_SIDEWAYS = {
    "conveyor.jobs": {"conveyor.rpc", "conveyor.web"},  # reads from below: models/, iterator/
}
"""Packages that must not import these (a feature reads from below, not from its peers)."""


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


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The module at ``path``, parsed (once: the checks read the same tree)."""
    return ast.parse(path.read_text(), str(path))


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
        tree = parsed(path)
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
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found.append(f"{name}.{node.name} ({lines} lines)")
    return sorted(found)


def _package(module: str) -> str:
    """The part of the package ``module`` belongs to: ``conveyor.processing`` for
    ``conveyor.processing.virtual.lane``, ``conveyor.consumer`` for a module of its own."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


NAMEDTUPLE_API = {"_replace", "_asdict", "_make", "_field_defaults"}
"""A named tuple's public methods: underscored only so as not to clash with its fields."""


def _is_private(name: str) -> bool:
    return (
        name.startswith("_")
        and not (name.startswith("__") and name.endswith("__"))
        and name not in NAMEDTUPLE_API
    )


def _members(tree: ast.AST) -> Iterator[str]:
    """The private names ``tree`` defines as members: in a class body (methods, attributes,
    ``__slots__``), as ``self._x = ...`` / ``cls._x = ...``, and at module level (read as
    ``module._x``)."""
    for node in ast.walk(tree):
        body = node.body if isinstance(node, ast.ClassDef | ast.Module) else []
        for item in body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield item.name
            elif isinstance(item, ast.Assign | ast.AnnAssign):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        yield target.id
                        if target.id == "__slots__" and item.value is not None:
                            for slot in ast.walk(item.value):
                                if isinstance(slot, ast.Constant) and isinstance(slot.value, str):
                                    yield slot.value
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            yield node.attr


def _uses_of_others_privates(tree: ast.AST) -> Iterator[ast.Attribute]:
    """Every ``x._name`` attribute node under ``tree`` (read, written or called) whose ``x``
    is not ``self``, ``cls`` or ``super()``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if (
                isinstance(owner, ast.Call)
                and isinstance(owner.func, ast.Name)
                and owner.func.id == "super"
            ):
                continue
            yield node


@dataclass(frozen=True)
class PrivateRead:
    """``module`` (at ``line``) uses ``name``, a private member of another object (read,
    written or called: every ``x._name`` attribute node whose ``x`` is not ``self``, ``cls``
    or ``super()``); ``homes``: the packages that define a member of that name."""

    module: str
    line: int
    name: str
    homes: frozenset[str]

    @property
    def across(self) -> bool:
        """Whether it crosses a package boundary (see :func:`private_reads`)."""
        return bool(self.homes) and _package(self.module) not in self.homes


def private_reads() -> list[PrivateRead]:
    """Every use of another object's private member in the package (the review's count).

    Whether one crosses a package boundary depends on the class of ``x`` in ``x._name``,
    which an ast pass cannot know; this follows the review's method (§2) by the name: a
    private name belongs to every package that defines a member of that name (a method or
    attribute of one of its classes, ``self._name = ...``, or a module-level name), and a use
    is across a boundary when the reader's package defines no member of that name. A name
    defined in the reader's package and elsewhere too counts as the reader's own (this can
    only undercount); a name no module of the package defines (``os._exit``, confluent-kafka's
    ``_PARTITION_EOF``) is a library's private, not counted as across."""
    trees = {name: parsed(path) for name, path in module_names().items()}
    homes: dict[str, set[str]] = defaultdict(set)
    for module, tree in trees.items():
        for name in _members(tree):
            if _is_private(name):
                homes[name].add(_package(module))
    found = [
        PrivateRead(module, node.lineno, node.attr, frozenset(homes[node.attr]))
        for module, tree in trees.items()
        for node in _uses_of_others_privates(tree)
    ]
    return sorted(found, key=lambda read: (read.module, read.line))


def fmt_skips() -> dict[str, int]:
    """Each module's ``# fmt: skip`` comments (lines laid out by hand, not by the formatter),
    counted as comments (a string that says it does not count)."""
    found = {}
    for name, path in module_names().items():
        with path.open("rb") as source:
            count = sum(
                1
                for token in tokenize.tokenize(source.readline)
                if token.type == tokenize.COMMENT and "fmt: skip" in token.string
            )
        if count:
            found[name] = count
    return found


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


def test_the_private_reads_are_the_uses_of_another_objects_private_members() -> None:
    sample = ast.parse(
        "class K:\n    _kept = 1\n    def m(self, other):\n        self._mine = other._theirs\n"
        "        cls._c; super()._up(); other.__dict__; other._replace(); other._kept\n"
    )
    assert sorted(set(_members(sample))) == ["K", "_kept", "_mine", "m"]
    used = [node.attr for node in _uses_of_others_privates(sample)]
    assert sorted(used) == ["_kept", "_theirs"]
    assert PrivateRead(
        "conveyor.processing.filters", 1, "_raw", frozenset({"conveyor.messages"})
    ).across
    assert not PrivateRead(
        "conveyor.processing.lane", 1, "_x", frozenset({"conveyor.processing"})
    ).across
    assert not PrivateRead("conveyor.cli.server", 1, "_exit", frozenset()).across, "a library's"


def test_import_circles_ratchet_toward_three() -> None:
    assert len(circles(imports())) <= max(RATCHET_CIRCLES, TARGET_CIRCLES)


def test_private_reads_across_packages_ratchet_toward_ten() -> None:
    across = [f"{r.module}:{r.line} {r.name}" for r in private_reads() if r.across]
    assert len(across) <= max(RATCHET_PRIVATE_READS_ACROSS, TARGET_PRIVATE_READS_ACROSS), across


def test_lines_laid_out_by_hand_ratchet_toward_under_sixty() -> None:
    assert sum(fmt_skips().values()) <= max(RATCHET_FMT_SKIPS, TARGET_FMT_SKIPS)


def test_features_read_from_below_not_sideways() -> None:
    wrong = sorted(
        f"{edge.source}:{edge.line} -> {edge.target}"
        for edge in imports()
        if (
            _package(edge.source) in SIDEWAYS
            and _package(edge.target) not in SIDEWAYS[_package(edge.source)]
            and _package(edge.target) != _package(edge.source)
        )
        or _package(edge.target) in NOT_SIDEWAYS.get(_package(edge.source), set())
    )
    assert wrong == []


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
    reads = private_reads()
    across = [read for read in reads if read.across]
    print(f"\nprivate reads: {len(reads)}; across packages: {len(across)}, by file:")
    by_file: dict[str, list[PrivateRead]] = defaultdict(list)
    for read in across:
        by_file[read.module].append(read)
    for module, found in sorted(by_file.items(), key=lambda item: (-len(item[1]), item[0])):
        uses = ", ".join(f"{read.name} ({read.line})" for read in found)
        print(f"  {len(found):3}  {module}: {uses}")
    skips = fmt_skips()
    print(f"\nfmt: skip: {sum(skips.values())}; most in:")
    for module, count in sorted(skips.items(), key=lambda item: (-item[1], item[0]))[:10]:
        print(f"  {count:3}  {module}")
    print(
        f"\ncircles {len(groups)} (ratchet {RATCHET_CIRCLES}, target {TARGET_CIRCLES}); "
        f"private reads across packages {len(across)} (ratchet {RATCHET_PRIVATE_READS_ACROSS}, "
        f"target {TARGET_PRIVATE_READS_ACROSS}); fmt: skip {sum(skips.values())} "
        f"(ratchet {RATCHET_FMT_SKIPS}, target {TARGET_FMT_SKIPS})"
    )
