"""Instrumentation: the monitor (event bus), the event names, and the logging listener."""

from conveyor.instrumentation.logging_listener import LoggingListener
from conveyor.instrumentation.monitor import ALL_EVENTS, Event, Listener, Monitor

__all__ = ["ALL_EVENTS", "Event", "Listener", "LoggingListener", "Monitor"]
