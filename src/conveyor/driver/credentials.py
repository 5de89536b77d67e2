"""Refused credentials: told at once, not after a timeout.

librdkafka treats a refused login or a failed TLS handshake like any lost connection: it
reports an error event and tries again, while a request waits for its timeout (300 s for a
message). Each client Conveyor makes watches its error events for these and fails what waits
with an :class:`~conveyor.errors.AuthenticationError` that says what to check.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaException

from conveyor.errors import AuthenticationError, KafkaError

__all__ = ["refusal", "sliced_metadata"]

T = TypeVar("T")

_SASL = frozenset({"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"})
# A broker that wants a client certificate and gets none ends the handshake with an alert,
# which librdkafka reports as a transport failure.
_CERTIFICATE_ALERTS = ("alert bad certificate", "alert certificate required", "alert unknown ca")
# A handshake that broke off is not a refusal (seen when a connection re-authenticates with a
# fresh OAUTHBEARER token while a request is in flight), unless the broker does not offer the
# mechanism at all.
_HANDSHAKE = "mechanism handshake failed"
_UNSUPPORTED = "Unsupported SASL mechanism"
_SLICE = 1.0


def refusal(
    failure: KafkaError, config: Mapping[str, Any], client: str
) -> AuthenticationError | None:
    """The :class:`AuthenticationError` that ``failure`` (an error event of ``client``) means,
    or ``None`` when it is not a refusal: another error, or a SASL handshake that broke off
    (a connection re-authenticating while a request was in flight, one that dropped), after
    which librdkafka logs in again by itself."""
    text = str(failure)
    name = failure.name
    if name in _SASL:
        if _HANDSHAKE in text and _UNSUPPORTED not in text:
            return None
    elif not (name == "_SSL" and "certificate" in text) and not (
        name == "_TRANSPORT" and any(alert in text for alert in _CERTIFICATE_ALERTS)
    ):
        return None
    protocol = str(config.get("security.protocol", "plaintext")).upper()
    if name in _SASL:
        check = (
            f"check sasl.mechanism ({config.get('sasl.mechanism', 'GSSAPI')}), sasl.username "
            "and sasl.password, or the token your oauth provider returns"
        )
    else:
        check = (
            "check ssl.ca.location (the CA that signed the broker's certificate) and, where the "
            "broker wants one, the client certificate (ssl.keystore.location or "
            "ssl.certificate.location and ssl.key.location)"
        )
    return AuthenticationError(
        f"Kafka refused the {client}'s authentication over {protocol}: {text}; {check}",
        code=failure.code,
        name=name,
    )


def sliced_metadata(
    ask: Callable[[float], T],
    timeout: float,
    refused: Callable[[], AuthenticationError | None],
) -> T:
    """``ask(seconds)`` (a metadata request that blocks up to ``seconds``) within ``timeout``,
    in slices of one second, then two, four ... (a slow broker still gets the time it needs),
    so that a refusal noticed between slices (``refused()``, which may serve the client's
    events) ends the wait early.

    Raises:
        AuthenticationError: the credentials were refused meanwhile.
        KafkaException: the last slice's failure, once ``timeout`` is spent.
    """
    deadline = time.monotonic() + timeout
    slice_ = _SLICE
    while True:
        remaining = deadline - time.monotonic()
        try:
            return ask(max(0.05, min(slice_, remaining)))
        except KafkaException:
            failure = refused()
            if failure is not None:
                raise failure from None
            if time.monotonic() >= deadline:
                raise
        slice_ *= 2
