"""The web UI: reporting from every process, aggregation into compacted topics, and the pages.

``app.web.enable()`` turns reporting on; ``conveyor web --app ...`` serves the UI (or mount
``app.web.asgi()``). The UI itself needs the ``web`` extra (Starlette, Jinja2, uvicorn).
"""

from conveyor.web.topics import WebTopics
from conveyor.web.web import Web

__all__ = ["Web", "WebTopics"]
