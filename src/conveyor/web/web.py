"""``app.web``: turn reporting (and aggregation) on, and build the UI as an ASGI app."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConfigurationError
from conveyor.instrumentation import events as ev
from conveyor.validation import check_seconds
from conveyor.web.access import Access, Policy
from conveyor.web.aggregation.aggregator import Aggregator
from conveyor.web.commands import Commander
from conveyor.web.process.command_handler import CommandHandler
from conveyor.web.process.tracking import Tracker
from conveyor.web.signing import KEY_ENV, CommandSigner
from conveyor.web.signing import commands_key as commands_key_from
from conveyor.web.topics import WebTopics

if TYPE_CHECKING:
    from conveyor.metrics.prometheus import Metrics
    from conveyor.routing.host import RoutedHost
    from conveyor.tracing.latency import Latency
    from conveyor.web.reading.data import WebData

__all__ = ["Web"]


class Web:
    """The web UI's side of an app (``app.web``).

    Example::

        app.web.enable()                 # report every 5 s, aggregate in this process too
        asgi = app.web.asgi()            # mount it in Starlette or FastAPI, or `conveyor web`
    """

    def __init__(
        self, app: RoutedHost, metrics: Metrics | None = None, latency: Latency | None = None
    ) -> None:
        self.app = app
        self.metrics = metrics
        """The app's metrics, which the UI's ``/metrics`` serves when they are enabled."""
        self.latency = latency
        """The app's per-stage latency, which the reports carry when it is measured."""
        self.topics = WebTopics()
        self.tracking_interval = 5.0
        self.enabled = False
        self.tracker: Tracker | None = None
        self.aggregator: Aggregator | None = None
        self.commands: CommandHandler | None = None
        self._signer: CommandSigner | None = None
        self.commands_key_source: str | None = None
        """Where the commands key came from (``argument``, ``$CONVEYOR_COMMANDS_KEY``), once
        :meth:`enable` found one."""
        self._data: WebData | None = None
        self._lock = threading.Lock()
        self.access = Access()
        """Who may do what in the UI (:meth:`protect`); open, with every action, by default."""
        self.connect_group = os.environ.get("CONVEYOR_CONNECT_GROUP") or "conveyor-connect"
        """The connect cluster the UI's Connectors page shows (``conveyor connect worker
        --group``; default ``$CONVEYOR_CONNECT_GROUP``, else ``conveyor-connect``)."""

    def enable(
        self,
        *,
        tracking_interval: float = 5.0,
        aggregate: bool = True,
        topics: WebTopics | None = None,
        forget_after: float = 3600.0,
        commands: bool = True,
        commands_key: str | bytes | None = None,
    ) -> None:
        """Report this process to the web UI every ``tracking_interval`` seconds while the app
        runs, and publish every error it sees; with ``aggregate`` (the default) this process
        also takes part in the aggregating group ``conveyor_web``; with ``commands`` (the
        default) it carries out the commands sent to it (``conveyor ctl``, the web UI's
        actions: quiet, stop, probe, pause, resume, seek). With ``commands_key`` (default
        ``$CONVEYOR_COMMANDS_KEY``) it carries out only commands signed with that key, and the
        app's commander signs them (see :mod:`conveyor.web.signing`); without one, anyone who
        can write the commands topic can drive this process (a warning says so). Call before
        ``app.run()``.

        Raises:
            ConfigurationError: a bad interval, a key shorter than 16 bytes, or enabled twice.
        """
        check_seconds("tracking_interval", tracking_interval)
        check_seconds("forget_after", forget_after)
        if tracking_interval <= 0:
            raise ConfigurationError("tracking_interval must be above 0", "tracking_interval")
        if not isinstance(aggregate, bool):
            raise ConfigurationError("aggregate must be True or False", "aggregate")
        if not isinstance(commands, bool):
            raise ConfigurationError("commands must be True or False", "commands")
        key = commands_key_from(commands_key)
        with self._lock:
            if self.enabled:
                raise ConfigurationError("app.web.enable() was called twice", "web")
            self.enabled = True
        self.topics = topics or self.topics
        self.tracking_interval = float(tracking_interval)
        self.tracker = Tracker(self.app, self.topics, self.tracking_interval, self.latency)
        self.tracker.attach()
        self._signer = CommandSigner(key, self.topics.commands) if key is not None else None
        if key is not None:
            self.commands_key_source = "argument" if commands_key is not None else f"${KEY_ENV}"
        if commands:
            self.commands = CommandHandler(self.app, self.topics, self.tracker.id, self._signer)
            self.commands.attach()
        if aggregate:
            self.aggregator = self.new_aggregator(forget_after=forget_after)
            self.app.monitor.subscribe(ev.APP_RUNNING, self._start_aggregator)
        self.app.add_closing_hook(self._close)
        if self.app.state == "running":
            self.tracker.start()
            if self.commands is not None:
                self.commands.start()
            if self.aggregator is not None:
                self.aggregator.start()

    def new_aggregator(self, forget_after: float = 3600.0) -> Aggregator:
        """An aggregator over the app's settings and producer (``conveyor web`` runs one)."""
        return Aggregator(
            self.app.settings.kafka,
            lambda: self.app.producer,
            self.topics,
            flush_interval=self.tracking_interval,
            forget_after=forget_after,
            client_id=self.app.settings.client_id,
        )

    def _start_aggregator(self, _event: Any) -> None:
        if self.aggregator is not None:
            self.aggregator.start()

    def _close(self) -> None:
        """The app's consumers stopped; its producer is still open."""
        if self.commands is not None:
            self.commands.stop()
        if self.tracker is not None:
            self.tracker.stop()
        if self.aggregator is not None:
            self.aggregator.stop()

    def protect(
        self,
        *,
        password_hash: str | None = None,
        user: str = "admin",
        authenticate: Callable[[Any], str | None] | None = None,
        read_only: bool = False,
        policy: Policy | None = None,
        secret: str | bytes | None = None,
        session_seconds: float = 12 * 3600.0,
        session_idle_seconds: float = 30 * 60.0,
    ) -> None:
        """Who may use the UI and what they may do (see :class:`~conveyor.web.access.Access`):
        a password login (``password_hash`` from ``conveyor web hash-password``), or the host
        app's ``authenticate(request) -> user | None`` when the UI is mounted in one;
        ``read_only`` hides and refuses every action; ``policy(user, action, target) -> bool``
        decides each action; ``secret`` signs session cookies (random per process when not
        given); a session ends ``session_seconds`` after sign-in, after
        ``session_idle_seconds`` unused, or at Sign out. Call before ``asgi()``.

        Raises:
            ConfigurationError: a malformed hash, both a password and ``authenticate``, a
                secret shorter than 16 bytes.
        """
        key = secret.encode("utf-8") if isinstance(secret, str) else secret
        self.access = Access(
            password_hash=password_hash,
            user=user,
            authenticate=authenticate,
            read_only=read_only,
            policy=policy,
            session_seconds=session_seconds,
            session_idle_seconds=session_idle_seconds,
            **({"secret": key} if key is not None else {}),
        )

    def commander(self) -> Commander:
        """Sends commands to this app's processes and waits for their results (signed with
        the commands key, when there is one: ``enable(commands_key=...)`` or
        ``$CONVEYOR_COMMANDS_KEY``)."""
        signer = self._signer
        if signer is None and (key := commands_key_from(None)) is not None:
            signer = CommandSigner(key, self.topics.commands)
        return Commander(self.app.settings.kafka, self.topics, self.app.producer, signer)

    @property
    def data(self) -> WebData:
        """The tail of the web UI's topics that the pages read (started on first use)."""
        with self._lock:
            if self._data is None:
                from conveyor.web.reading.data import WebData  # noqa: PLC0415 - only the UI needs it

                self._data = WebData(self.app.settings.kafka, self.topics)
            return self._data

    def asgi(self) -> Any:
        """The web UI as a Starlette (ASGI) app: serve it with uvicorn, or mount it.

        Raises:
            ConfigurationError: the ``web`` extra is not installed.
        """
        try:
            from conveyor.web.ui.server import create_asgi  # noqa: PLC0415 - the web extra
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigurationError(
                f"the web UI needs the web extra: pip install 'conveyor[web]' ({exc})", "web"
            ) from exc
        return create_asgi(self, self.data, self.access)
