"""A PostgreSQL logical replication connection (the streaming replication protocol over
libpq, through psycopg's ``pq`` layer): create a slot exporting its snapshot, stream the
slot's ``pgoutput`` messages, and confirm how far they were written elsewhere, so that
PostgreSQL keeps the WAL until then and no longer.

Waiting for data is a wait on the connection's socket (``select``), woken by the server."""

from __future__ import annotations

import select
import struct
import time
from dataclasses import dataclass

import psycopg
from psycopg import pq
from psycopg.conninfo import make_conninfo
from psycopg.pq.abc import PGconn, PGresult

from conveyor.connect.sources.pgoutput import lsn_text
from conveyor.errors import ConveyorError

__all__ = ["ReplicationError", "Slot", "Stream", "create_slot"]

_EPOCH_OFFSET_US = 946_684_800_000_000  # 2000-01-01 in Unix microseconds


class ReplicationError(ConveyorError):
    """PostgreSQL's replication connection failed or the server refused a command.

    Raised when the database is unreachable or went away, a slot is held by another
    connection, or the user lacks the ``REPLICATION`` attribute. A change data capture task
    reconnects by itself after the first two.

    What to do: for a refusal, read the message (``wal_level=logical``, the user's
    ``REPLICATION`` attribute, ``max_replication_slots``); else nothing: the task goes on."""


@dataclass(frozen=True)
class Slot:
    """A slot just made: where its changes begin and the snapshot it exported (valid until
    the next command on the connection that made it)."""

    name: str
    consistent_point: int
    snapshot: str


def _lsn(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def _connect(url: str) -> PGconn:
    connection: PGconn = pq.PGconn.connect(make_conninfo(url, replication="database").encode())
    if connection.status != pq.ConnStatus.OK:
        message = connection.get_error_message()
        connection.finish()
        raise ReplicationError(f"cannot connect for replication: {message}")
    return connection


def _command(connection: PGconn, command: str) -> PGresult:
    result = connection.exec_(command.encode())
    if result.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
        raise ReplicationError(
            f"{command.split(maxsplit=1)[0]} failed: {result.get_error_message().strip()}"
        )
    return result


def create_slot(url: str, name: str, temporary: bool = False) -> tuple[PGconn, Slot]:
    """Create logical slot ``name`` (``pgoutput``) exporting its snapshot; the connection is
    returned open, and the snapshot stays importable while it is (close it once imported). A
    ``temporary`` slot goes with the connection (made for its snapshot alone)."""
    connection = _connect(url)
    kind = "TEMPORARY LOGICAL" if temporary else "LOGICAL"
    try:
        result = _command(
            connection, f"CREATE_REPLICATION_SLOT \"{name}\" {kind} pgoutput (SNAPSHOT 'export')"
        )
        point, snapshot = result.get_value(0, 1), result.get_value(0, 2)
        if point is None or snapshot is None:
            raise ReplicationError("CREATE_REPLICATION_SLOT returned no snapshot")
        return connection, Slot(name, _lsn(point.decode()), snapshot.decode())
    except BaseException:
        connection.finish()
        raise


class Stream:
    """The changes of slot ``slot`` for publication ``publication``, from ``start`` (an LSN;
    PostgreSQL begins no earlier than what was confirmed last)."""

    def __init__(self, url: str, slot: str, publication: str, start: int) -> None:
        self._connection = connection = _connect(url)
        connection.send_query(
            f'START_REPLICATION SLOT "{slot}" LOGICAL {lsn_text(start)} '
            f"(proto_version '1', publication_names '{publication}')".encode()
        )
        result = connection.get_result()
        if result is None or result.status != pq.ExecStatus.COPY_BOTH:
            message = "" if result is None else result.get_error_message().strip()
            connection.finish()
            raise ReplicationError(f"START_REPLICATION failed: {message}")
        connection.nonblocking = 1
        self._confirmed = start
        self._received = start

    def read(self, timeout: float) -> list[bytes]:
        """The ``pgoutput`` messages that came within ``timeout`` seconds (``[]``: none);
        keepalives are answered here.

        Raises:
            ReplicationError: the server ended the stream or the connection broke.
        """
        connection = self._connection
        messages: list[bytes] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                connection.consume_input()
            except psycopg.OperationalError as error:
                raise ReplicationError(str(error)) from None
            while True:
                size, data = connection.get_copy_data(1)
                if size == 0:
                    break
                if size < 0:
                    raise ReplicationError(
                        "the replication stream ended: " + connection.get_error_message().strip()
                    )
                raw = bytes(data)
                if raw[:1] == b"w":  # XLogData: start, end, clock, then the message
                    start, _end, _clock = struct.unpack_from("!QQq", raw, 1)
                    self._received = max(self._received, start)
                    messages.append(raw[25:])
                elif raw[:1] == b"k":  # keepalive: end, clock, reply requested
                    _end, _clock, reply = struct.unpack_from("!QqB", raw, 1)
                    if reply:
                        self.confirm(self._confirmed)
            left = deadline - time.monotonic()
            if messages or left <= 0:
                return messages
            ready, _, _ = select.select([connection.socket], [], [], left)
            if not ready:
                return messages

    def confirm(self, lsn: int) -> None:
        """Tell the server the changes up to ``lsn`` were written elsewhere (it may recycle
        their WAL; a restart begins after them)."""
        self._confirmed = max(self._confirmed, lsn)
        now = int(time.time() * 1_000_000) - _EPOCH_OFFSET_US
        connection = self._connection
        status = struct.pack(
            "!cQQQqB", b"r", self._confirmed, self._confirmed, self._confirmed, now, 0
        )
        if connection.put_copy_data(status) != 1 or connection.flush() < 0:
            raise ReplicationError(connection.get_error_message().strip())

    def close(self) -> None:
        self._connection.finish()
