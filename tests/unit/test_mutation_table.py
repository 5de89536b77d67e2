"""Every test the mutation harness (tests/mutations.py) runs exists: a renamed test would
make the harness stop at its control run, or a mutant look killed for the wrong reason."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from mutations import MUTATIONS

ROOT = Path(__file__).resolve().parents[2]


@cache
def _names(path: Path) -> set[str]:
    """``name`` and ``Class::name`` of every function in the test file."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.add(node.name)
        elif isinstance(node, ast.ClassDef):
            found.update(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return found


def test_every_guarding_test_exists() -> None:
    missing = []
    for mutation in MUTATIONS:
        for test in mutation.tests:
            file, _, name = test.partition("::")
            path = ROOT / file
            if not path.is_file() or (name and name.split("[")[0] not in _names(path)):
                missing.append(f"{mutation.name}: {test}")
    assert missing == []
