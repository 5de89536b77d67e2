"""Request-reply over Kafka: :class:`Handlers` and ``app.routes.rpc(...)`` on the server,
:class:`Client` on the caller's side."""

from conveyor.rpc.client import Client
from conveyor.rpc.handlers import Handlers

__all__ = ["Client", "Handlers"]
