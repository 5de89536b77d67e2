"""Every module of the package imports on its own, in a fresh interpreter and without the
package's ``__init__`` running first: an import cycle that only works because ``__init__``
happens to import things in a lucky order fails here."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
from pathlib import Path

import conveyor

PACKAGE = Path(conveyor.__file__).parent


def modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":  # runs the command line when imported
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


# The top-level package is created empty, so that nothing but the module itself (and what it
# imports) runs: ``conveyor/__init__.py`` imports nearly everything and would hide a cycle.
ALONE = """
import importlib, sys, types
package = types.ModuleType("conveyor")
package.__path__ = [{path!r}]
sys.modules["conveyor"] = package
importlib.import_module({module!r})
"""


def import_alone(module: str) -> tuple[str, str]:
    code = (
        f"import {module}"
        if module == "conveyor"
        else ALONE.format(path=str(PACKAGE), module=module)
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return module, result.stderr.strip().splitlines()[-1] if result.returncode else ""


def test_every_module_imports_alone() -> None:
    names = modules()
    assert "conveyor.consumer" in names
    assert "conveyor.routing.dead_letter_queue" in names
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        failures = {module: error for module, error in pool.map(import_alone, names) if error}
    assert failures == {}
