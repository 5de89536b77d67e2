"""MkDocs hook: the web UI's screenshots as the browser tests last took them.

`make test`'s browser tests (tests/integration/web/test_browser*.py) save every page they
drive to ``tests/artifacts/``; a site built after them shows those in place of the ones kept in
``docs/images/`` (which stay as they are, so a test run leaves the working tree clean).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

ARTIFACTS = Path(__file__).resolve().parents[2] / "tests" / "artifacts"
# the image the docs show -> what the browser tests save
TAKEN_AS = {
    "web-dashboard.png": "web-dashboard-1280.png",
    "web-explorer.png": "web-explorer.png",
    "web-dlq.png": "web-dlq.png",
}


def on_post_build(config: Any, **_: Any) -> None:
    images = Path(config["site_dir"]) / "images"
    for shown, taken in TAKEN_AS.items():
        fresh = ARTIFACTS / taken
        if fresh.exists() and images.is_dir():
            shutil.copyfile(fresh, images / shown)
