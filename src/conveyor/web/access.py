"""Who may do what in the web UI: a password login (hashed at rest, a signed session cookie),
or the host app's authentication when the UI is mounted in one; read-only mode; a policy
hook per action; and the CSRF token every action must carry.

Nothing here knows Starlette: :class:`Access` is the settings (``app.web.protect(...)``),
:class:`Sessions` signs and reads cookie values, and the UI's server applies them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conveyor.errors import ConfigurationError
from conveyor.validation import check_seconds

__all__ = [
    "ACTIONS",
    "Access",
    "Session",
    "Sessions",
    "hash_password",
    "verify_password",
]

ACTIONS = (
    "republish",
    "redrive",
    "discard",
    "quiet",
    "stop",
    "probe",
    "pause",
    "resume",
    "seek",
    "rebuild",
    "restart",
    "cancel",
    "run",
    "disable",
    "enable",
    "configure",
    "delete",
)
"""Everything the UI can do besides reading: refused in read-only mode, asked of the policy.
``cancel`` is a scheduled message's (its target: the schedule's id); ``run``, ``disable`` and
``enable`` a recurring task's (its target: the task's name); ``pause``, ``resume``, ``stop``
and ``restart`` are also a connector's, ``configure`` (create it or change its configuration)
and ``delete`` only a connector's (their target: ``connector <name>``, ``connector <name>
task <id>``)."""

Policy = Callable[[str | None, str, str], bool]
"""``policy(user, action, target) -> bool``: ``user`` is ``None`` on an open UI; ``target``
names what the action is for (``orders/3``, ``orders_dlq``, a process id)."""

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
_HASH_PREFIX = "scrypt"


def hash_password(password: str) -> str:
    """``password`` hashed with scrypt and a random salt, as one text to keep in settings
    (``conveyor web hash-password`` prints one)."""
    if not password:
        raise ConfigurationError("the password is empty", "password")
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, dklen=32, **_SCRYPT)
    parts = (
        _HASH_PREFIX,
        str(_SCRYPT["n"]),
        str(_SCRYPT["r"]),
        str(_SCRYPT["p"]),
        base64.b64encode(salt).decode("ascii"),
        base64.b64encode(digest).decode("ascii"),
    )
    return "$".join(parts)


def _parse_hash(hashed: str) -> tuple[int, int, int, bytes, bytes]:
    try:
        prefix, n, r, p, salt, digest = hashed.split("$")
        if prefix != _HASH_PREFIX:
            raise ValueError(prefix)
        return int(n), int(r), int(p), base64.b64decode(salt), base64.b64decode(digest)
    except ValueError:
        raise ConfigurationError(
            "password_hash is not a hash made by `conveyor web hash-password` "
            "(scrypt$N$r$p$salt$digest)",
            "password_hash",
        ) from None


def verify_password(password: str, hashed: str) -> bool:
    """Whether ``password`` is the one ``hashed`` was made from (in constant time)."""
    n, r, p, salt, digest = _parse_hash(hashed)
    candidate = hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=len(digest), maxmem=2**26
    )
    return hmac.compare_digest(candidate, digest)


@dataclass(frozen=True)
class Access:
    """The web UI's access settings (``app.web.protect(...)``).

    * ``password_hash``: a login page asks for the password (user ``user``); without it and
      without ``authenticate`` the UI is open to whoever reaches its port.
    * ``authenticate(request) -> str | None``: the host app's authentication when the UI is
      mounted in one (the signed-in user's name, ``None`` when nobody is signed in).
    * ``read_only``: every action hidden and refused (403).
    * ``policy(user, action, target) -> bool``: asked before each action (see ``ACTIONS``).
    * ``secret``: the key that signs session cookies (random per process when not given:
      sessions then end when the UI restarts, and UIs behind one address need the same one).
    """

    password_hash: str | None = None
    user: str = "admin"
    authenticate: Callable[[Any], str | None] | None = None
    read_only: bool = False
    policy: Policy | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    session_seconds: float = 12 * 3600.0
    session_idle_seconds: float = 30 * 60.0
    """A session unused this long has ended (its cookie no longer signs anyone in)."""

    def __post_init__(self) -> None:
        if self.password_hash is not None:
            _parse_hash(self.password_hash)
        if self.password_hash is not None and self.authenticate is not None:
            raise ConfigurationError(
                "give password_hash or authenticate, not both", "password_hash"
            )
        if self.authenticate is not None and not callable(self.authenticate):
            raise ConfigurationError("authenticate must be callable", "authenticate")
        if self.policy is not None and not callable(self.policy):
            raise ConfigurationError("policy must be callable", "policy")
        if not isinstance(self.read_only, bool):
            raise ConfigurationError("read_only must be True or False", "read_only")
        if not isinstance(self.secret, bytes) or len(self.secret) < 16:
            raise ConfigurationError("secret must be at least 16 bytes", "secret")
        if not self.user or not isinstance(self.user, str):
            raise ConfigurationError("user must be a name", "user")
        check_seconds("session_seconds", self.session_seconds)
        check_seconds("session_idle_seconds", self.session_idle_seconds)

    @property
    def login(self) -> bool:
        """Whether the UI asks for its own password."""
        return self.password_hash is not None

    @property
    def closed(self) -> bool:
        """Whether a visitor must be signed in (by the password or by the host app)."""
        return self.password_hash is not None or self.authenticate is not None

    def allows(self, user: str | None, action: str, target: str) -> bool:
        """Whether ``user`` may do ``action`` on ``target`` (read-only refuses everything)."""
        if self.read_only or action not in ACTIONS:
            return False
        if self.policy is None:
            return True
        try:
            return bool(self.policy(user, action, target))
        except Exception:  # a policy that fails refuses
            return False


@dataclass(frozen=True)
class Session:
    """What the session cookie holds: the signed-in user (``None``: nobody), the CSRF token
    every action must echo (random per session: it names the session too), when it expires
    and when it was last used (epoch seconds)."""

    user: str | None
    csrf: str
    expires: float
    seen: float = 0.0

    @classmethod
    def new(cls, user: str | None, seconds: float) -> Session:
        now = time.time()
        return cls(user, secrets.token_urlsafe(24), now + seconds, now)


class Sessions:
    """Signs sessions into cookie values and reads them back (HMAC-SHA256; a tampered,
    malformed, expired, idle or signed-out value reads as no session).

    A signed-out session is remembered by this process until it would have expired, so that
    a copy of its cookie no longer works here; UI processes behind one address do not share
    what they remember (each one's own sign-outs: see the README)."""

    COOKIE = "conveyor_session"

    def __init__(self, secret: bytes, idle_seconds: float = Access.session_idle_seconds) -> None:
        self._secret = secret
        self.idle_seconds = idle_seconds
        self._revoked: dict[str, float] = {}  # csrf token -> when the session would expire
        self._revoked_lock = threading.Lock()

    def revoke(self, session: Session) -> None:
        """Sign ``session`` out: its cookie reads as no session from now on (in this process)."""
        now = time.time()
        with self._revoked_lock:
            for token, expires in list(self._revoked.items()):
                if expires < now:  # past its own expiry: refused without being remembered
                    del self._revoked[token]
            self._revoked[session.csrf] = session.expires

    def touched(self, session: Session, now: float | None = None) -> Session | None:
        """``session`` with a fresh ``seen`` stamp when the last one is old enough to be worth a
        new cookie (a tenth of the idle time), else ``None``."""
        now = time.time() if now is None else now
        if now - session.seen < self.idle_seconds / 10:
            return None
        return Session(session.user, session.csrf, session.expires, now)

    def _sign(self, body: bytes) -> str:
        return _b64(hmac.new(self._secret, body, hashlib.sha256).digest())

    def dump(self, session: Session) -> str:
        """The cookie value: base64url (no padding, so no quoting) of the session, a dot, and
        its signature."""
        payload = {"u": session.user, "c": session.csrf, "e": session.expires, "s": session.seen}
        body = _b64(json.dumps(payload).encode())
        return f"{body}.{self._sign(body.encode('ascii'))}"

    def load(self, value: str | None, now: float | None = None) -> Session | None:
        if not value or "." not in value:
            return None
        body_text, _, signature = value.rpartition(".")
        try:
            body, given = body_text.encode("ascii"), signature.encode("ascii")
        except UnicodeEncodeError:
            return None
        if not hmac.compare_digest(self._sign(body).encode("ascii"), given):
            return None
        try:
            fields = json.loads(base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4)))
            session = Session(
                fields["u"], str(fields["c"]), float(fields["e"]), float(fields.get("s", 0.0))
            )
        except (ValueError, KeyError, TypeError):
            return None
        if session.user is not None and not isinstance(session.user, str):
            return None
        now = time.time() if now is None else now
        if session.expires < now or now - session.seen > self.idle_seconds:
            return None
        if session.csrf in self._revoked:
            return None
        return session


class Attempts:
    """Failed sign-ins per client over the last ``window`` seconds (at most ``limit``)."""

    def __init__(self, limit: int = 10, window: float = 60.0) -> None:
        self._limit = limit
        self._window = window
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque[float]:
        failures = self._failures.setdefault(client, deque())
        while failures and failures[0] < now - self._window:
            failures.popleft()
        return failures

    def allowed(self, client: str) -> bool:
        """Whether ``client`` may try again (fewer than ``limit`` failures in the window)."""
        with self._lock:
            return len(self._recent(client, time.monotonic())) < self._limit

    def failed(self, client: str) -> None:
        """Count a failed attempt of ``client``."""
        with self._lock:
            now = time.monotonic()
            self._recent(client, now).append(now)
            if len(self._failures) > 10_000:  # forget the quiet ones
                for name in [n for n, f in self._failures.items() if not f]:
                    del self._failures[name]


class SignInRefused(Exception):
    """An ``Authorization`` header refused: answer ``status`` with ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class BasicLogin:
    """Checks HTTP Basic credentials (``Authorization: Basic base64(user:password)``) against
    ``user`` and ``password_hash``: how REST clients and scripts sign in, with every call.

    A header that checked out is remembered (its SHA-256) for ``remember_seconds``, so scrypt
    runs once per client and not once per call; ``attempts`` counts the failures per client
    (give the login form's, so that both count against one limit)."""

    def __init__(
        self,
        user: str,
        password_hash: str,
        remember_seconds: float = 300.0,
        attempts: Attempts | None = None,
    ) -> None:
        _parse_hash(password_hash)
        self.user = user
        self.password_hash = password_hash
        self.remember_seconds = remember_seconds
        self.attempts = attempts or Attempts()
        self._known: dict[bytes, float] = {}
        self._lock = threading.Lock()

    def sign_in(self, header: str | None, client: str) -> str:
        """The user ``header`` signs in from ``client``. Slow (scrypt) for a header not seen
        lately: call it off the event loop.

        Raises:
            SignInRefused: no header or a wrong one (401), too many failures a minute (429).
        """
        if not self.attempts.allowed(client):
            raise SignInRefused(429, "Too many failed sign-ins: wait a minute.")
        user = None if header is None else self.user_of(header)
        if user is None:
            if header is not None:
                self.attempts.failed(client)
            raise SignInRefused(401, "Sign in with the user and password (HTTP Basic).")
        return user

    def user_of(self, header: str) -> str | None:
        """The user ``header`` signs in, or ``None`` (another scheme, malformed, wrong user or
        password). Slow (scrypt) for a header not seen lately: call it off the event loop."""
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "basic":
            return None
        digest = hashlib.sha256(header.encode("utf-8", "replace")).digest()
        now = time.monotonic()
        with self._lock:
            if self._known.get(digest, 0.0) > now:
                return self.user
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
        name, colon, password = decoded.partition(":")
        if not colon or not hmac.compare_digest(name.encode(), self.user.encode()):
            return None
        if not verify_password(password, self.password_hash):
            return None
        with self._lock:
            if len(self._known) > 1000:
                self._known = {d: t for d, t in self._known.items() if t > now}
            self._known[digest] = now + self.remember_seconds
        return self.user


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
