"""Conveyor's exceptions, one hierarchy.

::

    ConveyorError                      everything Conveyor raises on purpose
    └── BrokerError                    the development broker (``conveyor broker``)
        ├── ToolMissingError           Java or Maven is absent or too old
        ├── BrokerPortBusyError        something else listens on the port
        ├── BrokerDataError            the data folder cannot be used (corrupt, foreign)
        ├── BrokerStartError           the JVM exited or did not become ready in time
        └── BrokerNotRunningError      stop/logs on a broker that is not running

Every message says what is wrong and what to do about it, in one paragraph.
"""

from __future__ import annotations

__all__ = [
    "BrokerDataError",
    "BrokerError",
    "BrokerNotRunningError",
    "BrokerPortBusyError",
    "BrokerStartError",
    "ConveyorError",
    "ToolMissingError",
]


class ConveyorError(Exception):
    """Base class of every error Conveyor raises on purpose."""


class BrokerError(ConveyorError):
    """The development broker could not do what was asked."""


class ToolMissingError(BrokerError):
    """A program the development broker needs (Java, Maven) is missing or too old."""


class BrokerPortBusyError(BrokerError):
    """The port the broker should listen on is already taken."""


class BrokerDataError(BrokerError):
    """The broker's data folder is corrupt or belongs to something else."""


class BrokerStartError(BrokerError):
    """The broker process exited, or did not answer, before its deadline."""


class BrokerNotRunningError(BrokerError):
    """The command needs a running broker and there is none in that data folder."""
