"""Routing: which consumer class handles which topic, in which group, and how."""

from conveyor.routing.routes import Routes
from conveyor.routing.topic import Topic

__all__ = ["Routes", "Topic"]
