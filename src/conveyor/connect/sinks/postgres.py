"""``Postgres``: records inserted into a table keyed by (topic, partition, offset), so that a
record delivered again after a crash is not stored twice (``psycopg``; extra
``conveyor[postgres]``)."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from conveyor.connect.sink import Reject, Result
from conveyor.connect.sinks.records import record_json
from conveyor.errors import ConfigurationError

if TYPE_CHECKING:
    from conveyor.messages import Message

__all__ = ["Postgres"]

_IDENTIFIER = "abcdefghijklmnopqrstuvwxyz0123456789_"


class Postgres:
    """``INSERT ... ON CONFLICT DO NOTHING`` of each batch into ``table``, in one transaction
    per batch, committed before ``deliver`` returns (so before the offsets are marked).

    The table (created when missing, with ``create_table``) has the columns ``topic``,
    ``partition``, ``"offset"`` (its primary key), ``key`` (text), ``payload`` (jsonb),
    ``headers`` (jsonb), ``timestamp`` (timestamptz) and ``stored_at`` (when the row was
    written: the order of delivery). Lanes share up to ``connections``
    connections. A record that cannot be encoded is rejected (to the dead letter queue, with
    the reason); a database error retries the batch after the route's back-off.

    Args:
        dsn: the database, as psycopg takes it (``postgresql://user@host/db``).
        table: the table's name.
        create_table: create the table when it is missing (``False``: it must exist).
        connections: connections the lanes share, at most.
        encode: shapes a row, ``encode(record) -> dict`` with the keys of
            :func:`~conveyor.connect.sinks.records.record_json` (its default).
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str = "kafka_records",
        create_table: bool = True,
        connections: int = 8,
        encode: Callable[[Message], dict[str, Any]] = record_json,
    ) -> None:
        if not table or any(c not in _IDENTIFIER for c in table.lower()):
            raise ConfigurationError(
                f"Postgres: table must be a plain identifier (letters, digits, _), got {table!r}",
                "table",
            )
        self.dsn = dsn
        self.table = table
        self.create_table = create_table
        self.connections = connections
        self._encode = encode
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._opened: list[Any] = []
        self._lock = threading.Lock()

    def open(self) -> None:
        try:
            import psycopg  # noqa: PLC0415 - an optional dependency
        except ImportError as error:
            raise ConfigurationError(
                "the Postgres sink needs psycopg: pip install 'conveyor[postgres]'", "sink"
            ) from error
        if self.create_table:
            with psycopg.connect(self.dsn, autocommit=True) as connection:
                connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} ("
                    ' topic text NOT NULL, partition integer NOT NULL, "offset" bigint NOT NULL,'
                    " key text, payload jsonb, headers jsonb, timestamp timestamptz,"
                    " stored_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
                    ' PRIMARY KEY (topic, partition, "offset"))'
                )

    def _connection(self) -> Any:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if len(self._opened) < self.connections:
                import psycopg  # noqa: PLC0415

                connection = psycopg.connect(self.dsn)
                self._opened.append(connection)
                return connection
        return self._idle.get(timeout=60)

    def deliver(self, records: Sequence[Message]) -> list[Result]:
        results: list[Result] = []
        rows = []
        for record in records:
            try:
                line = self._encode(record)
                rows.append(
                    (
                        line["topic"],
                        line["partition"],
                        line["offset"],
                        line["key"],
                        json.dumps(line["payload"]),
                        json.dumps(line["headers"]),
                        line["timestamp"],
                    )
                )
            except Exception as error:
                results.append(Reject(f"cannot encode offset {record.offset}: {error!r}"))
                continue
            results.append(None)
        if rows:
            connection = self._connection()
            try:
                with connection.transaction(), connection.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO {self.table}"
                        ' (topic, partition, "offset", key, payload, headers, timestamp)'
                        " VALUES (%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s)"
                        " ON CONFLICT DO NOTHING",
                        rows,
                    )
            except Exception:
                if connection.closed:  # a broken connection is replaced on the next use
                    with self._lock:
                        self._opened.remove(connection)
                    raise
                self._idle.put(connection)
                raise
            self._idle.put(connection)
        return results

    def flush(self) -> None:
        return None

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for connection in opened:
            connection.close()
        while True:
            try:
                self._idle.get_nowait()
            except queue.Empty:
                break
