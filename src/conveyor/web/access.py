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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conveyor.errors import ConfigurationError

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
    "quiet",
    "stop",
    "probe",
    "pause",
    "resume",
    "seek",
)
"""Everything the UI can do besides reading: refused in read-only mode, asked of the policy."""

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
    every action must echo, and when it expires (epoch seconds)."""

    user: str | None
    csrf: str
    expires: float

    @classmethod
    def new(cls, user: str | None, seconds: float) -> Session:
        return cls(user, secrets.token_urlsafe(24), time.time() + seconds)


class Sessions:
    """Signs sessions into cookie values and reads them back (HMAC-SHA256; a tampered,
    malformed or expired value reads as no session)."""

    COOKIE = "conveyor_session"

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _sign(self, body: bytes) -> str:
        return _b64(hmac.new(self._secret, body, hashlib.sha256).digest())

    def dump(self, session: Session) -> str:
        """The cookie value: base64url (no padding, so no quoting) of the session, a dot, and
        its signature."""
        payload = {"u": session.user, "c": session.csrf, "e": session.expires}
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
            session = Session(fields["u"], str(fields["c"]), float(fields["e"]))
        except (ValueError, KeyError, TypeError):
            return None
        if session.user is not None and not isinstance(session.user, str):
            return None
        if session.expires < (time.time() if now is None else now):
            return None
        return session


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
