"""The web UI: reporting from every process, aggregation into compacted topics, and the pages.

``app.web.enable()`` turns reporting on; ``conveyor web --app ...`` serves the UI (or mount
``app.web.asgi()``). The UI itself needs the ``web`` extra (Starlette, Jinja2, uvicorn).

By side: ``process/`` runs in every app process (its reports and errors, the commands it
answers), ``aggregation/`` folds the reports into compacted topics, ``reading/`` reads the
topics for the pages (and any topic, for the explorer), ``ui/`` serves the pages. What the
sides share: the topics (``topics.py``), the report and command formats (``reports.py``,
``commands.py``), who may do what (``access.py``) and ``app.web`` itself (``web.py``).
"""

from conveyor.web.topics import WebTopics
from conveyor.web.web import Web

__all__ = ["Web", "WebTopics"]
