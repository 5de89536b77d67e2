"""A swarm node's side: a heartbeat to its supervisor, every second while the app runs and
its listeners poll (the app's liveness check). A node whose supervisor is gone stops
gracefully."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from conveyor.swarm.supervisor import HEARTBEAT_ENV

if TYPE_CHECKING:
    from conveyor.host import Host
    from conveyor.liveness import Health

__all__ = ["start_heartbeat"]

_log = logging.getLogger("conveyor.swarm")


def start_heartbeat(app: Host, alive: Callable[[], Health]) -> threading.Event | None:
    """Beat on the pipe the supervisor passed in ``CONVEYOR_SWARM_HEARTBEAT_FD`` (nothing when
    this process is not a swarm node) while ``alive()`` says so (``app.liveness.check``);
    returns the event that ends it."""
    fd_text = os.environ.get(HEARTBEAT_ENV)
    if not fd_text:
        return None
    fd = int(fd_text)
    done = threading.Event()

    def beat() -> None:
        while not done.wait(1.0):  # a beat a second; the event ends it at once
            if app.state not in ("running", "quiet") or not alive().ok:
                continue  # not alive: no beat, and the supervisor replaces the node in time
            try:
                os.write(fd, b".")
            except OSError:  # the supervisor is gone: nobody to replace this node
                _log.error("the swarm's supervisor is gone: stopping")
                app.stop()
                return

    threading.Thread(target=beat, name="conveyor-swarm-heartbeat", daemon=True).start()
    app.add_closing_hook(done.set)
    return done
