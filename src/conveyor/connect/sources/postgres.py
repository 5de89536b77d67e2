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
A snapshot cut short resumes after its last row written, under a newer snapshot
(``segments.py`` says which changes each row still needs).
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
from conveyor.connect.sources.segments import Position, Segments
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
        self._segments: Segments | None = None  # while changes may be in the snapshot already
        self._segments_json: dict[str, Any] | None = None  # the same, as offsets hold them
        self._relations: dict[int, Relation] = {}
        self._keys: dict[int, tuple[str, ...]] = {}  # each relation's primary key columns
        self._placed: dict[int, list[int]] = {}  # the columns placing its rows in the snapshot
        self._catalog: psycopg.Connection[Any] | None = None
        self._backlog: list[bytes] = []  # read, beyond a full poll's batch
        self._stopped = threading.Event()

    # -- starting -------------------------------------------------------------------------------

    def start(self, offsets: SourceOffsets) -> None:
        committed = offsets.get(self._partition) or {}
        self._ensure_publication()
        state = committed.get("snapshot")
        if state == "done":  # streaming: on from there at the first poll
            self._lsn = int(committed["lsn"])
            if "segments" in committed:
                self._set_segments(Segments.from_json(committed["segments"]))
            return
        if state == "running":
            if self._slot_exists():
                self._resume_snapshot(committed)
                return
            _log.warning(
                "PostgreSQL CDC %s: slot %s is gone; the snapshot begins again (the rows "
                "written before stay in Kafka)",
                self.prefix,
                self.slot,
            )
        elif not self.snapshot and self._slot_exists():
            self._lsn = 0  # nothing written yet: from where the slot stands
            return
        # the first start: a new slot, and its snapshot
        self._drop_slot()
        connection, slot = create_slot(self.url, self.slot)
        self._lsn = slot.consistent_point
        self._set_segments(Segments(slot.consistent_point))
        if self.snapshot:
            self._rows = self._snapshot(slot.snapshot, connection, None)
        else:
            connection.finish()

    def _resume_snapshot(self, committed: dict[str, Any]) -> None:
        """Read the rows after the last one written as of a new snapshot (a temporary slot's),
        and stream from the first snapshot's LSN, each change only where it is newer than the
        snapshot its row was read in."""
        self._lsn = int(committed["lsn"])
        segments = Segments.from_json(committed["segments"])
        schema, table, key = committed["at"]
        at: Position = (str(schema), str(table), tuple(map(str, key)))
        with psycopg.connect(self.url) as catalog:
            if not any(is_key for _, _, is_key in _columns(catalog, at[0], at[1])):
                # no primary key: its rows have no order to resume in (NULLs, TOASTed values):
                # the table is read again whole, its rows written before sent once more
                at = (at[0], at[1], ())
        connection, slot = create_slot(self.url, f"{self.slot}_resume", temporary=True)
        segments.cut(at, slot.consistent_point)
        self._set_segments(segments)
        _log.info("PostgreSQL CDC %s: the snapshot resumes after %s", self.prefix, at)
        self._rows = self._snapshot(slot.snapshot, connection, at)

    def _set_segments(self, segments: Segments | None) -> None:
        self._segments = segments
        self._segments_json = None if segments is None else segments.to_json()

    def _slot_exists(self) -> bool:
        with psycopg.connect(self.url, autocommit=True) as connection:
            found = connection.execute(
                "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (self.slot,)
            ).fetchone()
            return found is not None

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

    def _snapshot(
        self, name: str, exporter: Any, after: Position | None
    ) -> Generator[list[SourceRecord]]:
        """The rows of the published tables as of the exported snapshot ``name``, after
        ``after`` in the snapshot's order, in batches (each one's offset: its last row)."""
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
                if after is not None and (schema, table) < after[:2]:
                    continue  # read before the cut
                resume = after[2] if after is not None and (schema, table) == after[:2] else None
                yield from self._table_rows(connection, schema, table, resume)
            connection.rollback()

    def _table_rows(
        self,
        connection: psycopg.Connection[Any],
        schema: str,
        table: str,
        after: tuple[str, ...] | None,
    ) -> Generator[list[SourceRecord]]:
        """One table's rows in the order of their key as text (``COLLATE "C"``: the order of
        Python's ``str``), after the key ``after``; a table without a primary key is ordered
        by all its columns, and a batch never ends between two equal rows."""
        columns = _columns(connection, schema, table)
        keys = [name for name, _, is_key in columns if is_key]
        keyed = bool(keys)
        order = [i for i, (_, _, is_key) in enumerate(columns) if is_key or not keyed]
        as_text = [
            sql.SQL('{}::text COLLATE "C"').format(sql.Identifier(columns[i][0])) for i in order
        ]
        query = sql.SQL("SELECT {} FROM {}").format(
            sql.SQL(", ").join(
                sql.SQL("{}::text").format(sql.Identifier(column[0])) for column in columns
            ),
            sql.Identifier(schema, table),
        )
        if after:  # (a table read again whole resumes after ())
            query += sql.SQL(" WHERE ({}) > ({})").format(
                sql.SQL(", ").join(as_text),
                sql.SQL(", ").join(
                    sql.SQL('{}::text COLLATE "C"').format(sql.Literal(v)) for v in after
                ),
            )
        query += sql.SQL(" ORDER BY {}").format(sql.SQL(", ").join(as_text))
        with connection.cursor(name=f"snapshot_{schema}_{table}") as cursor:
            cursor.itersize = self.batch_size
            cursor.execute(query)
            rows = cursor.fetchmany(self.batch_size)
            while rows:
                upcoming = cursor.fetchmany(self.batch_size)
                if not keyed:  # equal rows stay in one batch: a cut falls between two keys
                    while upcoming and upcoming[0] == rows[-1]:
                        rows.append(upcoming.pop(0))
                        upcoming = upcoming or cursor.fetchmany(self.batch_size)
                offset = self._snapshot_offset((schema, table, tuple(rows[-1][i] for i in order)))
                yield [self._read_row(schema, table, columns, keys, row, offset) for row in rows]
                rows = upcoming

    def _snapshot_offset(self, at: Position) -> dict[str, Any]:
        assert self._segments is not None
        return {
            "lsn": self._lsn,
            "snapshot": "running",
            "segments": self._segments_json,
            "at": [at[0], at[1], list(at[2])],
        }

    def _read_row(
        self,
        schema: str,
        table: str,
        columns: list[tuple[str, int, bool]],
        keys: list[str],
        row: Any,
        offset: dict[str, Any],
    ) -> SourceRecord:
        after = {
            name: typed(oid, value) for (name, oid, _), value in zip(columns, row, strict=True)
        }
        key = {name: after[name] for name in keys} if keys else None
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
        return self._record(schema, table, key, None, after, "r", source, offset)

    # -- polling --------------------------------------------------------------------------------

    def poll(self, timeout: float) -> list[SourceRecord]:
        if self._rows is not None:
            batch = next(self._rows, None)
            if batch is not None:
                return batch
            self._rows = None  # the snapshot is read: say so with the stream's first offsets
            if self._segments is not None and not self._segments.spans:
                self._set_segments(None)  # read in one piece: every change streamed is newer
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
            source_offset=self._offset(),
        )

    def _offset(self) -> dict[str, Any]:
        """A streamed record's offset: the LSN after its transaction, and the snapshot's
        segments while a change may still be older than one of them."""
        offset: dict[str, Any] = {"lsn": self._lsn, "snapshot": "done"}
        if self._segments_json is not None:
            offset["segments"] = self._segments_json
        return offset

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
                        if self._segments is not None and self._lsn > self._segments.tail:
                            self._set_segments(None)  # every change from now on is newer
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
        keys = (
            tuple(c.name for c in relation.columns if c.key)
            if relation.replica_identity == "d"  # the flags name the primary key's columns
            else self._primary_key(relation.oid)  # (FULL flags every column)
        )
        self._keys[relation.oid] = keys
        placed = [i for i, c in enumerate(relation.columns) if c.name in keys]
        self._placed[relation.oid] = placed or list(range(len(relation.columns)))
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
            source_offset=self._offset(),
        )

    def _primary_key(self, oid: int) -> tuple[str, ...]:
        """Relation ``oid``'s primary key columns, from the catalog."""
        if self._catalog is None or self._catalog.closed:
            self._catalog = psycopg.connect(self.url, autocommit=True)
        rows = self._catalog.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s AND i.indisprimary "
            "ORDER BY a.attnum",
            (oid,),
        ).fetchall()
        return tuple(str(name) for (name,) in rows)

    def _change(self, change: Change | Truncate, began: Begin) -> list[Callable[[], SourceRecord]]:
        if isinstance(change, Truncate):
            return [
                partial(
                    self._record, r.schema, r.table, None, None, None, "t", self._source(r, began)
                )
                for r in (self._relations[oid] for oid in change.relations)
                if self._truncate_written(r, began.final_lsn)
            ]
        relation = self._relations[change.relation]
        columns, keys = relation.columns, self._keys.get(relation.oid, ())
        after = None if change.new is None else _row(columns, change.new)
        before = None if change.old is None else _row(columns, change.old)
        image = after if after is not None else before or {}
        key = {name: image.get(name) for name in keys} if keys else None
        old_key = None if before is None or not keys else {name: before.get(name) for name in keys}
        # a row read in the snapshot's part as of after this change has it already
        new_ok = change.new is None or self._newer(relation, change.new, began.final_lsn)
        old_ok = change.old is None or self._newer(relation, change.old, began.final_lsn)
        source = self._source(relation, began)
        table = (relation.schema, relation.table)
        if change.kind == "update" and old_key is not None and old_key != key:
            # the key changed: the row under its old key is deleted, one under the new created
            made = self._deleted(table, old_key, before, source) if old_ok else []
            if new_ok:
                made.append(partial(self._record, *table, key, None, after, "c", source))
            return made
        if not (new_ok if change.new is not None else old_ok):
            return []
        if change.kind == "delete":
            return self._deleted(table, key, before, source)
        op = "c" if change.kind == "insert" else "u"
        return [partial(self._record, *table, key, before, after, op, source)]

    def _deleted(
        self,
        table: tuple[str, str],
        key: dict[str, Any] | None,
        before: Any,
        source: dict[str, Any],
    ) -> list[Callable[[], SourceRecord]]:
        """A delete's record, then its key's tombstone (``tombstones.on.delete``)."""
        made: list[Callable[[], SourceRecord]] = [
            partial(self._record, *table, key, before, None, "d", source)
        ]
        if self.tombstones and key is not None:
            made.append(partial(self._plain, self._topic(*table), json_dumps(key), None))
        return made

    def _newer(self, relation: Relation, values: tuple[Any, ...], commit_lsn: int) -> bool:
        """Whether the snapshot lacks a change committed at ``commit_lsn`` to the row with
        ``values`` (always, once no part of the snapshot is newer than the stream)."""
        segments = self._segments
        if segments is None:
            return True
        placed = tuple(str(values[i]) for i in self._placed[relation.oid])
        return segments.newer((relation.schema, relation.table, placed), commit_lsn)

    def _truncate_written(self, relation: Relation, commit_lsn: int) -> bool:
        """Whether a ``TRUNCATE`` of ``relation`` is written: unless the snapshot read the
        table after it (or part of it: logged, as its rows read before stay in Kafka)."""
        if self._segments is None:
            return True
        lsns = self._segments.table_lsns(relation.schema, relation.table)
        if commit_lsn >= max(lsns):
            return True
        if commit_lsn >= min(lsns):
            _log.warning(
                "PostgreSQL CDC %s: a TRUNCATE of %s.%s committed between two parts of the "
                "snapshot is not written: the rows read before it stay in Kafka",
                self.prefix,
                relation.schema,
                relation.table,
            )
        return False

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
        offset: dict[str, Any] | None = None,
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
            source_offset=self._offset() if offset is None else offset,
        )

    # -- failures and stopping ------------------------------------------------------------------

    def _drop_stream(self) -> None:
        self._backlog = []  # read again from the last LSN written
        if self._catalog is not None:
            with contextlib.suppress(Exception):
                self._catalog.close()
            self._catalog = None
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
