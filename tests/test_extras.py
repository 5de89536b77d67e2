"""Each extra installs what the pages that name it import.

A page that says ``pip install 'conveyor[otel]'`` and then imports ``opentelemetry.sdk.trace``
promises that the extra brings the SDK: every module its Python blocks import must come from
a distribution that Conveyor's dependencies and the extras the page names install (their
dependencies included), as read from this environment's installed metadata.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib import metadata, util
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from docs_examples import blocks_of

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
NAMED = re.compile(r"conveyor\[([a-z0-9_,-]+)\]")
# What else a page tells the reader to install: `pip install 'conveyor[web]' pytest`.
PIP_INSTALL = re.compile(r"pip install ([^\n`#]+)")
PAGES = sorted([*ROOT.glob("docs/**/*.md"), ROOT / "README.md"])
PAGES_WITH_EXTRAS = [page for page in PAGES if NAMED.search(page.read_text())]


def extras_named(text: str) -> set[str]:
    return {extra for match in NAMED.finditer(text) for extra in match.group(1).split(",")}


def others_named(text: str) -> list[str]:
    """The plain requirements of the page's ``pip install`` lines, besides Conveyor."""
    return [
        word.strip("'\"")
        for line in PIP_INSTALL.findall(text)
        for word in line.split()
        if re.fullmatch(r"[A-Za-z][\w.-]*", word.strip("'\"")) and "conveyor" not in word
    ]


def imported(text: str) -> set[str]:
    """The absolute imports of a page's Python blocks, as dotted module names."""
    modules: set[str] = set()
    for block in blocks_of(text):
        if block.language != "python":
            continue
        for node in ast.walk(ast.parse(block.code)):
            if isinstance(node, ast.Import):
                modules.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module)
    return modules


@cache
def owners() -> dict[Path, str]:
    """Every installed file, by the distribution that installed it."""
    found: dict[Path, str] = {}
    for distribution in metadata.distributions():
        name = canonicalize_name(distribution.metadata["Name"])
        for file in distribution.files or []:
            found[Path(str(distribution.locate_file(file))).resolve()] = name
    return found


def distribution_of(module: str) -> str | None:
    """The distribution that installed ``module``; None for the standard library, Conveyor,
    a page's own modules (``shop``) and namespace packages (``opentelemetry`` alone)."""
    if module.split(".", maxsplit=1)[0] in {*sys.stdlib_module_names, "conveyor"}:
        return None
    try:
        spec = util.find_spec(module)
    except ImportError:
        return None
    if spec is None or spec.origin is None:
        return None
    return owners().get(Path(spec.origin).resolve())


def installed_by(requirements: list[str]) -> set[str]:
    """The distributions ``pip install`` of these requirements brings, dependencies included."""
    found: set[str] = set()
    pending = [Requirement(text) for text in requirements]
    done: set[tuple[str, frozenset[str]]] = set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in done:
            continue
        done.add(key)
        found.add(name)
        try:
            needs = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:  # not for this platform or Python
            continue
        for text in needs:
            need = Requirement(text)
            extras = requirement.extras or {""}
            if need.marker is None or any(need.marker.evaluate({"extra": e}) for e in extras):
                pending.append(need)
    return found


def test_a_page_may_install_more_than_conveyor() -> None:
    text = "pip install 'conveyor[pydantic,web]' pytest   # and\n`pip install -U msgspec`"
    assert others_named(text) == ["pytest", "msgspec"]
    assert others_named("RUN pip install --no-cache-dir . \\") == []


def test_pages_name_extras_that_exist() -> None:
    unknown = {
        str(page.relative_to(ROOT)): sorted(extras_named(page.read_text()) - set(EXTRAS))
        for page in PAGES
    }
    assert {page: names for page, names in unknown.items() if names} == {}


@pytest.mark.parametrize("page", PAGES_WITH_EXTRAS, ids=lambda page: str(page.relative_to(ROOT)))
def test_extras_install_what_the_page_imports(page: Path) -> None:
    text = page.read_text()
    extras = sorted(extras_named(text) & set(EXTRAS))
    requirements = [*PROJECT["dependencies"], *others_named(text)]
    for extra in extras:
        requirements += EXTRAS[extra]
    installed = installed_by(requirements)
    missing = {
        module: owner
        for module in sorted(imported(text))
        if (owner := distribution_of(module)) is not None and owner not in installed
    }
    assert missing == {}, f"conveyor[{','.join(extras)}] does not install these"


def test_the_otel_extra_brings_the_sdk_the_observability_page_imports() -> None:
    """The check above sees the SDK by its files (``opentelemetry`` is a namespace package)."""
    assert distribution_of("opentelemetry.sdk.trace") == "opentelemetry-sdk"
    assert "opentelemetry-sdk" not in installed_by(["opentelemetry-api"])
    assert "opentelemetry-sdk" in installed_by(EXTRAS["otel"])
