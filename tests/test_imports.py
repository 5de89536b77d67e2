"""Every module of the package imports on its own, in a fresh interpreter and without the
package's ``__init__`` running first: an import cycle that only works because ``__init__``
happens to import things in a lucky order fails here."""

from __future__ import annotations

import json
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


# One interpreter imports every library Conveyor's modules use, the standard library's and
# third parties' (none of them imports Conveyor: checked), then forks a child per module: the
# child makes the top-level package empty, so that nothing but the module itself (and what it
# imports) runs, and imports it. ``conveyor/__init__.py`` imports nearly everything and would
# hide a cycle. A fork from a parent that holds the libraries instead of a fresh interpreter
# per module: the same check of Conveyor's own imports in a fraction of the CPU.
LIBRARIES = """
import importlib, json, pkgutil, sys
import conveyor
for name in [m.name for m in pkgutil.walk_packages(conveyor.__path__, "conveyor.")]:
    if name not in ("conveyor.__main__",):
        importlib.import_module(name)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] != "conveyor")))
"""
FORKS = """
import importlib, json, os, sys, types
libraries, modules = json.load(sys.stdin)
for library in libraries:
    try:
        importlib.import_module(library)
    except Exception:
        pass
assert "conveyor" not in sys.modules, "a library imported conveyor"
failures = {{}}
for module in modules:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            if module != "conveyor":
                package = types.ModuleType("conveyor")
                package.__path__ = [{path!r}]
                sys.modules["conveyor"] = package
            importlib.import_module(module)
        except BaseException as error:
            os.write(write, f"{{type(error).__name__}}: {{error}}".encode())
            os._exit(1)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as told:
        said = told.read().decode()
    _, status = os.waitpid(pid, 0)
    if status:
        failures[module] = said or f"exit status {{status}}"
print(json.dumps(failures))
"""


def test_every_module_imports_alone() -> None:
    names = modules()
    assert "conveyor.consumer" in names
    assert "conveyor.routing.dead_letter_queue" in names
    libraries = subprocess.run(
        [sys.executable, "-c", LIBRARIES], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    result = subprocess.run(
        [sys.executable, "-c", FORKS.format(path=str(PACKAGE))],
        input=json.dumps([json.loads(libraries), names]),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads(result.stdout) == {}


# What a bare ``import conveyor`` may load: the core (the App, its consumers and producer, the
# monitor, the driver). The features (web, schedules, jobs, metrics, liveness, tracing, the
# engine itself) load when first used, so a script that only produces does not pay for them.
MOST_MODULES_AT_IMPORT = 60


def test_import_conveyor_loads_only_the_core() -> None:
    code = (
        f"import json, sys; sys.path.insert(0, {str(PACKAGE.parent)!r}); import conveyor; "
        "print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] == 'conveyor')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    loaded = json.loads(result.stdout)
    assert len(loaded) <= MOST_MODULES_AT_IMPORT, (
        f"import conveyor loads {len(loaded)} modules (at most {MOST_MODULES_AT_IMPORT}):\n"
        + "\n".join(loaded)
    )
