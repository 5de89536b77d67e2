"""OAUTHBEARER tokens from the user's provider, in the shape librdkafka asks for them.

librdkafka calls a client's ``oauth_cb`` for its first token and again when 80 % of the
current one's lifetime has passed; :func:`oauth_callback` turns ``App(oauth_token_provider=)``
and ``Producer(oauth_token_provider=)`` into that callback, checked when they are built.

confluent-kafka asks for the first token while it builds a client and, when the callback
fails, waits 10 s and reports only that no token was set; :func:`prime_token` asks first, so
that a provider that raises or returns something other than a token fails the client's
construction at once, in its own words (the token is then handed to librdkafka's first ask:
the provider is not called twice).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from conveyor.errors import ConfigurationError
from conveyor.oauth_settings import check_extensions, check_principal_name

__all__ = ["OAuthCallback", "OAuthToken", "oauth_callback", "prime_token"]

_log = logging.getLogger("conveyor.oauth")
_SHAPE = "(token, expiry[, principal[, extensions]])"


class OAuthToken(NamedTuple):
    """What an ``oauth_token_provider`` returns (a plain tuple of the same shape does too):
    the ``token``, its ``expiry`` (an aware ``datetime`` or seconds since the epoch), and
    optionally the token's ``principal`` name (librdkafka names the token by it in its logs;
    the broker takes the principal from the token itself) and the SASL ``extensions`` sent
    with it when logging in (a mapping of names, letters only, to values of printable
    ASCII; a broker or a proxy in front of it may ask for some, Confluent Cloud for
    ``logicalCluster`` and ``identityPoolId``)."""

    token: str
    expiry: datetime | float
    principal: str | None = None
    extensions: Mapping[str, str] | None = None


Answer = tuple[str, float] | tuple[str, float, str, dict[str, str]]
"""What librdkafka gets: ``(token, seconds)``, or with the principal and the extensions."""


class OAuthCallback:
    """librdkafka's ``oauth_cb``: ``(token, expiry in seconds since the epoch)`` from the
    provider, with the principal name and the SASL extensions when it gives them; counts the
    tokens it handed out (``issued``)."""

    def __init__(self, provider: Callable[[], tuple[Any, ...]]) -> None:
        self.provider = provider
        self.issued = 0
        self._lock = threading.Lock()
        self._primed: Answer | None = None

    def __call__(self, _config: str | None = None) -> Answer:
        with self._lock:
            primed, self._primed = self._primed, None
        if primed is not None:
            return primed
        try:
            return self._fetch()
        except Exception:
            # librdkafka reports the failure (an authentication error) and asks again later
            _log.exception("the oauth_token_provider failed")
            raise

    def prime(self) -> None:
        """Ask the provider for a token now, for the next ask of librdkafka.

        Raises:
            ConfigurationError: the provider returned something other than ``(token, expiry)``
                (with a principal name and SASL extensions, optionally), or a principal or an
                extension librdkafka would refuse (``setting`` is ``oauth_token_provider``).
            Exception: what the provider raised, as it raised it.
        """
        try:
            token = self._fetch()
        except ConfigurationError:
            raise
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"{exc}: an oauth_token_provider returns {_SHAPE} (an OAuthToken), the token "
                "a non-empty string and the expiry an aware datetime or seconds since the epoch",
                "oauth_token_provider",
            ) from exc
        with self._lock:
            self._primed = token

    def _fetch(self) -> Answer:
        answer = self.provider()
        if not isinstance(answer, tuple) or not 2 <= len(answer) <= 4:
            raise TypeError(f"the oauth_token_provider returned {_shown(answer)}, not {_SHAPE}")
        token, expiry, principal, extensions = (*answer, None, None)[:4]
        if not isinstance(token, str) or not token:
            raise TypeError(
                f"the oauth_token_provider returned {type(token).__name__}, not a token"
            )
        seconds = _seconds(expiry)
        result: Answer = (token, seconds)
        if principal is not None or extensions is not None:
            where = "the oauth_token_provider's token"
            result = (
                token,
                seconds,
                ""
                if principal is None
                else check_principal_name(principal, "oauth_token_provider", where),
                check_extensions(extensions or {}, "oauth_token_provider", where),
            )
        with self._lock:
            self.issued += 1
        return result

    def __repr__(self) -> str:
        name = getattr(self.provider, "__qualname__", type(self.provider).__name__)
        return f"<OAuthCallback of {name}>"


def prime_token(config: Mapping[str, Any]) -> None:
    """Before a client is built from ``config``: prime its ``oauth_cb`` if it is Conveyor's
    (see :meth:`OAuthCallback.prime`); a callback of the user's own is left alone."""
    callback = config.get("oauth_cb")
    if isinstance(callback, OAuthCallback):
        callback.prime()


def _shown(answer: Any) -> str:
    """A provider's wrong answer, named without printing what may be a secret."""
    if isinstance(answer, tuple):
        return f"a tuple of {len(answer)}"
    return type(answer).__name__


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
            f"oauth_token_provider must be a callable returning {_SHAPE}, not {provider!r}",
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
