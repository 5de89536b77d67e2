"""Change data capture from PostgreSQL: every row of the published tables first (the
snapshot, read in the snapshot a new replication slot exported, so that no change is missed
or counted twice between the two), then each insert, update and delete as the database
commits it, read from the slot through logical replication.

Records follow Debezium's envelope, so its consumers read them: the key is the row's
primary key as a JSON object, the value ``{"before", "after", "source", "op", "ts_ms"}``
with ``op`` ``r`` (a snapshot read), ``c``, ``u``, ``d`` or ``t`` (truncate); a delete is
followed by a tombstone (``tombstones.on.delete``). A table goes to topic
``<prefix>.<schema>.<table>``; a table whose columns changed is announced on
``<prefix>.schema_changes`` before its first change under the new columns.

Each poll returns whole database transactions, so under exactly-once a transaction's
changes become visible in Kafka together, with the LSN after them as the source offset. A
restarted task resumes after the last LSN written; PostgreSQL is told to keep the WAL until
then (``confirm``). When the database goes away the task reconnects and goes on from there.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Generator
from functools import partial
from typing import Any

import psycopg
from psycopg import sql

from conveyor.connect.runtime.plugins import SourceOffsets, SourceRecord, SourceTask
from conveyor.connect.sources.pgoutput import (
    UNCHANGED,
    Begin,
    Change,
    Commit,
    Relation,
    Truncate,
    decode,
    lsn_text,
    typed,
)
from conveyor.connect.sources.replication import ReplicationError, Stream, create_slot
from conveyor.serialization import json_dumps

__all__ = ["PostgresChanges"]

_log = logging.getLogger("conveyor.connect")
_UNAVAILABLE = "__unavailable__"  # a TOASTed value the update did not send again
_RECONNECT = (0.5, 1, 2, 5)  # seconds between attempts to reach the database again


class PostgresChanges(SourceTask):
    """The changes of the tables ``tables`` (``schema.table``; none: every table) of the
    database at ``url`` (see the module)."""

    def __init__(
        self,
        url: str,
        prefix: str,
        tables: list[str],
        slot: str,
        publication: str,
        snapshot: bool,
        batch_size: int,
        tombstones: bool,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.tables = tables
        self.slot = slot
        self.publication = publication
        self.snapshot = snapshot
        self.batch_size = batch_size
        self.tombstones = tombstones
        self._partition = {"server": prefix}
        self._lsn = 0  # the end of the last transaction returned
        self._stream: Stream | None = None
        self._rows: Generator[list[SourceRecord]] | None = None
        self._relations: dict[int, Relation] = {}
        self._backlog: list[bytes] = []  # read, beyond a full poll's batch
        self._stopped = threading.Event()

    # -- starting -------------------------------------------------------------------------------

    def start(self, offsets: SourceOffsets) -> None:
        committed = offsets.get(self._partition)
        self._ensure_publication()
        if committed is not None and committed.get("snapshot") == "done":
            self._lsn = int(committed["lsn"])
            return  # streamed from there at the first poll
        # first start, or a snapshot cut short: begin again with a new slot and its snapshot
        self._drop_slot()
        connection, slot = create_slot(self.url, self.slot)
        self._lsn = slot.consistent_point
        if self.snapshot:
            self._rows = self._snapshot(slot.snapshot, connection)
        else:
            connection.finish()

    def _ensure_publication(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as connection:
            found = connection.execute(
                "SELECT 1 FROM pg_publication WHERE pubname = %s", (self.publication,)
            ).fetchone()
            if found is not None:
                return
            if self.tables:
                names = sql.SQL(", ").join(
                    sql.Identifier(*table.split(".", 1)) for table in self.tables
                )
                statement = sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
                    sql.Identifier(self.publication), names
                )
            else:
                statement = sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES").format(
                    sql.Identifier(self.publication)
                )
            connection.execute(statement)

    def _drop_slot(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (self.slot,),
            )

    def _snapshot(self, name: str, exporter: Any) -> Generator[list[SourceRecord]]:
        """Every row of the published tables as of the slot's snapshot, in batches."""
        with psycopg.connect(self.url) as connection:
            connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            connection.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(name)))
            exporter.finish()  # imported: the exporting connection may go
            tables = connection.execute(
                "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s "
                "ORDER BY 1, 2",
                (self.publication,),
            ).fetchall()
            for schema, table in tables:
                columns = _columns(connection, schema, table)
                selected = sql.SQL(", ").join(
                    sql.SQL("{}::text").format(sql.Identifier(column[0])) for column in columns
                )
                query = sql.SQL("SELECT {} FROM {}").format(selected, sql.Identifier(schema, table))
                with connection.cursor(name=f"snapshot_{schema}_{table}") as cursor:
                    cursor.itersize = self.batch_size
                    cursor.execute(query)
                    while rows := cursor.fetchmany(self.batch_size):
                        yield [self._read_row(schema, table, columns, row) for row in rows]
            connection.rollback()

    def _read_row(
        self, schema: str, table: str, columns: list[tuple[str, int, bool]], row: Any
    ) -> SourceRecord:
        after = {
            name: typed(oid, value) for (name, oid, _), value in zip(columns, row, strict=True)
        }
        key = {name: after[name] for name, _, is_key in columns if is_key}
        source = {
            "connector": "conveyor.postgres",
            "name": self.prefix,
            "schema": schema,
            "table": table,
            "lsn": self._lsn,
            "txId": None,
            "ts_ms": None,
            "snapshot": True,
        }
        return self._record(schema, table, key, None, after, "r", source, done=False)

    # -- polling --------------------------------------------------------------------------------

    def poll(self, timeout: float) -> list[SourceRecord]:
        if self._rows is not None:
            batch = next(self._rows, None)
            if batch is not None:
                return batch
            self._rows = None  # the snapshot is read: say so with the stream's first offsets
            return [self._snapshot_done()]
        try:
            return self._changes(timeout)
        except (ReplicationError, psycopg.OperationalError) as error:
            _log.warning("PostgreSQL CDC %s: %s; reconnecting", self.prefix, error)
            self._drop_stream()
            self._reconnect_wait()
            return []

    def _snapshot_done(self) -> SourceRecord:
        """A record of the snapshot's end (on ``<prefix>.schema_changes``: the stream begins
        at ``lsn``): its offset marks the snapshot done."""
        return SourceRecord(
            f"{self.prefix}.schema_changes",
            json_dumps({"snapshot": "done", "lsn": lsn_text(self._lsn)}),
            source_partition=self._partition,
            source_offset={"lsn": self._lsn, "snapshot": "done"},
        )

    def _changes(self, timeout: float) -> list[SourceRecord]:
        stream = self._stream
        if stream is None:
            stream = self._stream = Stream(self.url, self.slot, self.publication, self._lsn)
        records: list[SourceRecord] = []
        pending: list[Callable[[], SourceRecord]] = []  # the open transaction's, made at commit
        began: Begin | None = None
        deadline = time.monotonic() + timeout
        while not self._stopped.is_set():
            if self._backlog:
                messages, self._backlog = self._backlog, []
            else:
                messages = stream.read(max(0.0, deadline - time.monotonic()) if not began else 5.0)
            if not messages and began is None:
                break
            for at, raw in enumerate(messages):
                message = decode(raw)
                if isinstance(message, Begin):
                    if records and len(records) >= self.batch_size:
                        self._backlog = messages[at:]  # the next poll's
                        return records
                    began, pending = message, []
                elif isinstance(message, Relation):
                    pending.extend(self._relation(message, began))
                elif isinstance(message, Change | Truncate) and began is not None:
                    pending.extend(self._change(message, began))
                elif isinstance(message, Commit) and began is not None:
                    if message.end_lsn > self._lsn:  # else: written before a restart
                        self._lsn = message.end_lsn  # each record's offset: after its transaction
                        records.extend(make() for make in pending)
                    began, pending = None, []
            if began is None and (records or time.monotonic() >= deadline):
                break  # whole transactions read, and nothing more had come: written at once
        return records

    def committed(self) -> None:
        if self._stream is not None:
            try:
                self._stream.confirm(self._lsn)
            except ReplicationError as error:
                _log.warning("PostgreSQL CDC %s: could not confirm: %s", self.prefix, error)

    def _relation(
        self, relation: Relation, began: Begin | None
    ) -> list[Callable[[], SourceRecord]]:
        previous = self._relations.get(relation.oid)
        self._relations[relation.oid] = relation
        if previous is None or previous.columns == relation.columns:
            return []
        describe = [
            {"name": c.name, "type_oid": c.type_oid, "key": c.key} for c in relation.columns
        ]
        value = json_dumps(
            {
                "schema": relation.schema,
                "table": relation.table,
                "columns": describe,
                "previous": [c.name for c in previous.columns],
                "xid": None if began is None else began.xid,
            }
        )
        key = json_dumps({"schema": relation.schema, "table": relation.table})
        return [partial(self._plain, f"{self.prefix}.schema_changes", key, value)]

    def _plain(self, topic: str, key: bytes | None, value: bytes | None) -> SourceRecord:
        return SourceRecord(
            topic,
            value,
            key=key,
            source_partition=self._partition,
            source_offset={"lsn": self._lsn, "snapshot": "done"},
        )

    def _change(self, change: Change | Truncate, began: Begin) -> list[Callable[[], SourceRecord]]:
        if isinstance(change, Truncate):
            truncated: list[Callable[[], SourceRecord]] = [
                partial(
                    self._record, r.schema, r.table, None, None, None, "t", self._source(r, began)
                )
                for r in (self._relations[oid] for oid in change.relations)
            ]
            return truncated
        relation = self._relations[change.relation]
        columns = relation.columns
        after = None if change.new is None else _row(columns, change.new)
        before = None if change.old is None else _row(columns, change.old)
        image = after if after is not None else before or {}
        key = {c.name: image.get(c.name) for c in columns if c.key}
        op = {"insert": "c", "update": "u", "delete": "d"}[change.kind]
        source = self._source(relation, began)
        made: list[Callable[[], SourceRecord]] = [
            partial(self._record, relation.schema, relation.table, key, before, after, op, source)
        ]
        if op == "d" and self.tombstones:
            made.append(
                partial(
                    self._plain, self._topic(relation.schema, relation.table), json_dumps(key), None
                )
            )
        return made

    def _source(self, relation: Relation, began: Begin) -> dict[str, Any]:
        return {
            "connector": "conveyor.postgres",
            "name": self.prefix,
            "schema": relation.schema,
            "table": relation.table,
            "lsn": began.final_lsn,
            "txId": began.xid,
            "ts_ms": int(began.commit_time.timestamp() * 1000),
            "snapshot": False,
        }

    def _topic(self, schema: str, table: str) -> str:
        return f"{self.prefix}.{schema}.{table}"

    def _record(
        self,
        schema: str,
        table: str,
        key: dict[str, Any] | None,
        before: Any,
        after: Any,
        op: str,
        source: dict[str, Any],
        done: bool = True,
    ) -> SourceRecord:
        value = {
            "before": before,
            "after": after,
            "source": source,
            "op": op,
            "ts_ms": int(time.time() * 1000),
        }
        return SourceRecord(
            self._topic(schema, table),
            json_dumps(value),
            key=None if key is None else json_dumps(key),
            source_partition=self._partition,
            source_offset={"lsn": self._lsn, "snapshot": "done" if done else "running"},
        )

    # -- failures and stopping ------------------------------------------------------------------

    def _drop_stream(self) -> None:
        self._backlog = []  # read again from the last LSN written
        if self._stream is not None:
            with contextlib.suppress(Exception):  # already broken
                self._stream.close()
            self._stream = None

    def _reconnect_wait(self) -> None:
        for pause in _RECONNECT:
            if self._stopped.wait(pause):
                return
            try:
                with psycopg.connect(self.url, connect_timeout=5):
                    return  # reachable again: the next poll streams from the last LSN
            except psycopg.OperationalError:
                continue

    def stop(self) -> None:
        self._stopped.set()
        if self._rows is not None:
            self._rows.close()  # a snapshot cut short: its transaction ends
            self._rows = None
        self._drop_stream()


def _row(columns: tuple[Any, ...], values: tuple[Any, ...]) -> dict[str, Any]:
    return {
        column.name: _UNAVAILABLE if value is UNCHANGED else typed(column.type_oid, value)
        for column, value in zip(columns, values, strict=True)
    }


def _columns(
    connection: psycopg.Connection[Any], schema: str, table: str
) -> list[tuple[str, int, bool]]:
    """A table's columns in order: name, type oid, whether part of the primary key."""
    rows = connection.execute(
        "SELECT a.attname, a.atttypid, coalesce(a.attnum = ANY(i.indkey), false) "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        (schema, table),
    ).fetchall()
    return [(str(name), int(oid), bool(key)) for name, oid, key in rows]
