"""``Webhook``: records POSTed as JSON over a keep-alive connection pool (``httpx``; extra
``conveyor[http]``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from conveyor.connect.sink import Reject, Result, Retry
from conveyor.connect.sinks.records import record_json
from conveyor.errors import ConfigurationError

if TYPE_CHECKING:
    import httpx

    from conveyor.messages import Message

__all__ = ["Webhook"]


class Webhook:
    """POSTs each record (or, with ``batch=True``, each batch as a JSON array) to ``url``.

    2xx: delivered. 4xx: rejected (to the dead letter queue, with the status and the start
    of the response). 5xx, timeouts and connection errors: retried after the route's back-off
    (with ``batch=False``, from the record that failed; those before it count as delivered).
    ``concurrency`` bounds the pool's connections (lanes share them); ``timeout`` is per
    request. ``encode(record) -> dict`` shapes the body (a record it cannot encode is
    rejected)."""

    def __init__(
        self,
        url: str,
        *,
        batch: bool = False,
        concurrency: int = 16,
        timeout: float = 5.0,
        headers: Mapping[str, str] | None = None,
        encode: Callable[[Message], Any] = record_json,
    ) -> None:
        self.url = url
        self.batch = batch
        self.concurrency = concurrency
        self.timeout = timeout
        self.headers = {"content-type": "application/json", **(headers or {})}
        self._encode = encode
        self._client: httpx.Client | None = None

    def open(self) -> None:
        try:
            import httpx  # noqa: PLC0415 - an optional dependency
        except ImportError as error:
            raise ConfigurationError(
                "the Webhook sink needs httpx: pip install 'conveyor[http]'", "sink"
            ) from error
        limits = httpx.Limits(
            max_connections=self.concurrency, max_keepalive_connections=self.concurrency
        )
        self._client = httpx.Client(timeout=self.timeout, limits=limits, headers=self.headers)

    def deliver(self, records: Sequence[Message]) -> list[Result]:
        bodies: list[bytes | Reject] = []
        for record in records:
            try:
                bodies.append(json.dumps(self._encode(record)).encode("utf-8"))
            except Exception as error:
                bodies.append(Reject(f"cannot encode offset {record.offset}: {error!r}"))
        if self.batch:
            good = [body for body in bodies if isinstance(body, bytes)]
            verdict = self._post(b"[" + b",".join(good) + b"]") if good else None
            return [body if isinstance(body, Reject) else verdict for body in bodies]
        results: list[Result] = []
        for body in bodies:
            result = body if isinstance(body, Reject) else self._post(body)
            results.append(result)
            if isinstance(result, Retry):
                results.extend(Retry("after an earlier record") for _ in bodies[len(results) :])
                break
        return results

    def _post(self, body: bytes) -> Result:
        import httpx  # noqa: PLC0415 - an optional dependency

        client = self._client
        assert client is not None, "the sink is not open"
        try:
            response = client.post(self.url, content=body)
        except httpx.HTTPError as error:
            return Retry(f"{type(error).__name__}: {error}")
        status = response.status_code
        if status < 300:
            return None
        reason = f"HTTP {status}: {response.text[:200]}"
        return Reject(reason) if 400 <= status < 500 else Retry(reason)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
