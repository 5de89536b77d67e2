"""Conveyor: a Kafka processing framework for Python.

The public API grows part by part (see DESIGN.md); so far: the development
broker (:mod:`conveyor.broker`) and the exception hierarchy (:mod:`conveyor.errors`).
"""

from conveyor.errors import ConveyorError

__version__ = "0.1.0"

__all__ = ["ConveyorError", "__version__"]
