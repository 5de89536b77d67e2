"""OAUTHBEARER tokens from the user's provider, in the shape librdkafka asks for them.

librdkafka calls a client's ``oauth_cb`` for its first token and again when 80 % of the
current one's lifetime has passed; :func:`oauth_callback` turns ``App(oauth_token_provider=)``
into that callback, checked when the app is built.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from conveyor.errors import ConfigurationError

__all__ = ["OAuthCallback", "oauth_callback"]

_log = logging.getLogger("conveyor.oauth")


class OAuthCallback:
    """librdkafka's ``oauth_cb``: ``(token, expiry in seconds since the epoch)`` from the
    provider; counts the tokens it handed out (``issued``)."""

    def __init__(self, provider: Callable[[], tuple[str, Any]]) -> None:
        self.provider = provider
        self.issued = 0
        self._lock = threading.Lock()

    def __call__(self, _config: str | None = None) -> tuple[str, float]:
        try:
            token, expiry = self.provider()
        except Exception:
            # librdkafka reports the failure (an authentication error) and asks again later
            _log.exception("the oauth_token_provider failed")
            raise
        if not isinstance(token, str) or not token:
            raise TypeError(
                f"the oauth_token_provider returned {type(token).__name__}, not a token"
            )
        with self._lock:
            self.issued += 1
        return token, _seconds(expiry)

    def __repr__(self) -> str:
        name = getattr(self.provider, "__qualname__", type(self.provider).__name__)
        return f"<OAuthCallback of {name}>"


def _seconds(expiry: Any) -> float:
    if isinstance(expiry, datetime):
        if expiry.tzinfo is None:
            raise TypeError("the token's expiry must be a datetime with a time zone")
        return expiry.timestamp()
    if isinstance(expiry, int | float) and not isinstance(expiry, bool):
        return float(expiry)
    raise TypeError(f"the token's expiry must be a datetime or seconds, not {expiry!r}")


def oauth_callback(provider: Any, kafka: Mapping[str, Any]) -> OAuthCallback:
    """The ``oauth_cb`` for ``provider``, after checking that the settings use OAUTHBEARER.

    Raises:
        ConfigurationError: the provider is not callable, ``sasl.mechanism`` is not
            OAUTHBEARER, or the settings have an ``oauth_cb`` of their own.
    """
    if not callable(provider):
        raise ConfigurationError(
            f"oauth_token_provider must be a callable returning (token, expiry), not {provider!r}",
            "oauth_token_provider",
        )
    mechanism = str(kafka.get("sasl.mechanism", kafka.get("sasl.mechanisms", "")))
    if mechanism.upper() != "OAUTHBEARER":
        raise ConfigurationError(
            f'oauth_token_provider needs kafka["sasl.mechanism"]="OAUTHBEARER" (and a '
            f"security.protocol of SASL_SSL or SASL_PLAINTEXT), not {mechanism or 'none'!r}",
            "sasl.mechanism",
        )
    if "oauth_cb" in kafka:
        raise ConfigurationError(
            'give oauth_token_provider or kafka["oauth_cb"], not both', "oauth_token_provider"
        )
    return OAuthCallback(provider)
