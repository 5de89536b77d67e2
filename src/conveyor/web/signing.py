"""Signed commands: who may drive the app's processes.

Anyone who can write the commands topic could otherwise quiet, stop, seek or probe every
process. With a key (``$CONVEYOR_COMMANDS_KEY``, or ``app.web.enable(commands_key=...)``)
each request and each answer carries an HMAC-SHA256 of its bytes in the header
``conveyor-signature``, over the commands topic's name and the message's bytes (a request for
one app's topic is no good on another's); a process with the key carries out only requests
signed with it, sent within :data:`MAX_AGE` seconds, not before the process began listening
(less :data:`CLOCK_SKEW`) and not seen before (a copy of a signed request replayed later is
refused), and an issuer with the key hears only answers signed with it. Kafka's ACLs on the
topic (``conveyor acls``) are the other half: see the security page.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = [
    "CLOCK_SKEW",
    "HEADER",
    "KEY_ENV",
    "MAX_AGE",
    "MIN_KEY_BYTES",
    "PLACEHOLDER",
    "CommandSigner",
    "commands_key",
]

KEY_ENV = "CONVEYOR_COMMANDS_KEY"
HEADER = "conveyor-signature"
MAX_AGE = 300.0
"""Seconds a signed request stays good (clocks of the issuer and the process may differ by
less than this)."""
CLOCK_SKEW = 30.0
"""Seconds an issuer's clock may run behind a process's: a request sent earlier than the
process's start by more than this is refused (the process reads commands from its start on,
so only a replayed copy can be that old)."""
MIN_KEY_BYTES = 16
PLACEHOLDER = "CHANGE-ME"
"""What the example manifests' secrets start with: refused as a key."""
_PREFIX = b"v1="


def commands_key(given: str | bytes | None = None) -> bytes | None:
    """The key that signs commands: ``given``, else ``$CONVEYOR_COMMANDS_KEY``, else ``None``
    (commands unsigned).

    Raises:
        ConfigurationError: a key shorter than 16 bytes (naming where it came from).
    """
    source = "commands_key"
    if given is None:
        given, source = os.environ.get(KEY_ENV) or None, KEY_ENV
    if given is None:
        return None
    key = given.encode("utf-8") if isinstance(given, str) else given
    if isinstance(key, bytes) and key.startswith(PLACEHOLDER.encode()):
        raise ConfigurationError(
            f"{source} is still the example's placeholder: set a key of your own "
            "(e.g. `openssl rand -hex 32`)",
            source,
        )
    if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
        raise ConfigurationError(
            f"{source} must be at least {MIN_KEY_BYTES} bytes (e.g. `openssl rand -hex 32`)",
            source,
        )
    return key


class CommandSigner:
    """Signs what an issuer or a process sends and checks what it reads (one key)."""

    def __init__(self, key: bytes, topic: str, clock: Callable[[], float] = time.time) -> None:
        self._key = key
        self._topic = topic.encode()
        self._clock = clock
        self._seen: dict[str, float] = {}  # request id -> when it stops being good
        self._lock = threading.Lock()

    def signature(self, payload: bytes) -> bytes:
        """The header value for ``payload``."""
        signed = self._topic + b"\0" + payload
        return _PREFIX + hmac.new(self._key, signed, hashlib.sha256).hexdigest().encode()

    def signed(self, payload: bytes, headers: Mapping[str, Any] | None = None) -> bytes | None:
        """Whether ``payload``'s signature in ``headers`` is this key's: the signature, or
        ``None``."""
        given = (headers or {}).get(HEADER)
        if isinstance(given, str):
            given = given.encode()
        if not isinstance(given, bytes) or not hmac.compare_digest(given, self.signature(payload)):
            return None
        return given

    def refusal(
        self,
        request: Mapping[str, Any],
        payload: bytes,
        headers: Mapping[str, Any],
        not_before: float | None = None,
    ) -> str:
        """Why a request is refused, or ``""`` when it may be carried out: unsigned, signed
        with another key (or for another topic), sent more than :data:`MAX_AGE` seconds from
        now or before ``not_before``, or seen before."""
        if HEADER not in headers:
            return f"unsigned: this process carries out only commands signed with ${KEY_ENV}"
        if self.signed(payload, headers) is None:
            return "wrong signature: not signed with this process's commands key"
        now = self._clock()
        sent_at = request.get("sent_at")
        if not isinstance(sent_at, int | float) or abs(now - sent_at) > MAX_AGE:
            return f"expired: sent more than {MAX_AGE:g} s from this process's clock"
        if not_before is not None and sent_at < not_before:
            return "expired: sent before this process began reading commands"
        request_id = str(request.get("id"))
        with self._lock:
            for seen, until in list(self._seen.items()):
                if until < now:
                    del self._seen[seen]
            if request_id in self._seen:
                return "replayed: this request was carried out already"
            self._seen[request_id] = now + 2 * MAX_AGE
        return ""
