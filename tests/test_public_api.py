"""The public surface stays curated, and only the driver part talks to confluent-kafka."""

from __future__ import annotations

import ast
from pathlib import Path

import conveyor

PACKAGE = Path(conveyor.__file__).parent


def test_all_names_every_public_member() -> None:
    """Ruff (RUF022) keeps ``__all__`` sorted; this keeps it complete."""
    public = [name for name in dir(conveyor) if not name.startswith("_") or name == "__version__"]
    public = [name for name in public if not isinstance(getattr(conveyor, name), type(conveyor))]
    assert len(conveyor.__all__) == len(set(conveyor.__all__))
    assert set(conveyor.__all__) == set(public)


def test_every_module_declares_all() -> None:
    missing = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__main__.py"
        and "__all__" not in path.read_text()
        and path.read_text().strip().count("\n") > 3
    ]
    assert missing == []


def test_only_the_driver_imports_confluent_kafka() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "driver":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name.split(".")[0] == "confluent_kafka" for name in names):
                offenders.append(str(relative))
    assert offenders == []
