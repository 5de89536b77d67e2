"""Routing: which consumer class handles which topic, in which group, and how."""

from conveyor.routing.options import (
    DeadLetterQueueOptions,
    DeclaredTopicOptions,
    PatternOptions,
    RouteOptions,
    SinkOptions,
    TopicOptions,
    VirtualPartitionsOptions,
)
from conveyor.routing.routes import Routes
from conveyor.routing.topic import Topic

__all__ = [
    "DeadLetterQueueOptions",
    "DeclaredTopicOptions",
    "PatternOptions",
    "RouteOptions",
    "Routes",
    "SinkOptions",
    "Topic",
    "TopicOptions",
    "VirtualPartitionsOptions",
]
