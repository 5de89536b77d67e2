"""Which settings are secrets, and how they are shown: never in full.

Every place that shows settings to a person (log lines, the server's banner, ``conveyor info``,
the web UI, error messages) masks the values of settings whose names say they hold a password,
a secret, a token or key material.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "is_secret", "mask", "mask_text", "shown_setting"]

MASK = "********"

_SECRET_WORDS = (
    "password",
    "secret",
    "token",
    "credential",
    "passphrase",
    "user.info",
    "jaas.config",
    "ssl.key.pem",
    "ssl_key",
    "private.key",
    "oauthbearer.config",
)
_NOT_SECRET_ENDINGS = (".url", ".location", ".endpoint", ".method", ".type")


def is_secret(name: str) -> bool:
    """Whether the setting ``name`` holds a secret (``sasl.password``, ``ssl.key.pem``,
    ``ssl.keystore.password``, ``sasl.oauthbearer.client.secret`` ...); paths, URLs and kinds
    (``ssl.key.location``, ``sasl.oauthbearer.token.endpoint.url``) are not."""
    lowered = name.lower()
    if lowered.endswith(_NOT_SECRET_ENDINGS):
        return False
    return any(word in lowered for word in _SECRET_WORDS)


def mask(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``settings`` with every secret's value replaced by ``********``."""
    return {name: MASK if is_secret(str(name)) else value for name, value in settings.items()}


def mask_text(text: str, settings: Mapping[str, Any]) -> str:
    """``text`` with the values of ``settings``' secrets replaced (for messages that quote
    what a library said about a setting)."""
    for name, value in settings.items():
        if is_secret(str(name)) and isinstance(value, str | bytes) and len(value) >= 3:
            shown = value.decode(errors="replace") if isinstance(value, bytes) else value
            text = text.replace(shown, MASK)
    return text


def shown_setting(value: Any) -> str:
    """A setting's value as text for a person: callables (``oauth_cb``, ``logger``) by what
    they are, not by their address."""
    if isinstance(value, str):
        return value
    if callable(value) and not isinstance(value, type):
        text = repr(value)
        if " at 0x" in text:
            return f"<{getattr(value, '__qualname__', type(value).__qualname__)}>"
        return text
    return str(value)
