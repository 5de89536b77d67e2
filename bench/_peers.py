"""The peers' environment: aiokafka, FastStream, Celery, Dramatiq and Quix Streams (and what
they pull in: pydantic, redis-py, rocksdict), pinned,
in a virtualenv of its own beside the checkout (``.venv-bench-peers``, made once), never among
Conveyor's dependencies. The benchmarks run the peers' sides with its interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["PEERS", "PEER_PACKAGES", "peers_python"]

PEERS = Path(__file__).resolve().parent.parent / ".venv-bench-peers"
PEER_PACKAGES = (
    "aiokafka==0.14.0", "faststream[kafka]==0.7.8", "celery[redis]==5.5.3",
    "dramatiq[redis]==1.17.1", "quixstreams==3.28.1",
)  # fmt: skip


def peers_python() -> str:
    """The peers' environment's interpreter, made (once) with its pinned packages."""
    python = PEERS / "bin" / "python"
    stamp = PEERS / "installed.txt"
    if not stamp.exists() or stamp.read_text() != "\n".join(PEER_PACKAGES):
        print(f"making {PEERS} with {', '.join(PEER_PACKAGES)}", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(PEERS)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES],
            check=True,
        )
        stamp.write_text("\n".join(PEER_PACKAGES))
    return str(python)
