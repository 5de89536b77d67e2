"""The app's stores in this process: where their files go, which are open, how changelogs are
read.

Files are laid out as ``<state_dir>/<group>/<slot>/<topic>/<store>/<partition>``. The slot is
this process's slot on the host (:mod:`conveyor.slots`), held for the process's life: two
processes alive at once never share a folder (so never a RocksDB lock), and a process started
after one that crashed takes its slot and reopens its stores warm, replaying only what the
changelog holds beyond them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conveyor.driver.consumers import ConsumerClient
from conveyor.instrumentation import events as ev
from conveyor.iterator.scan import reader_settings
from conveyor.slots import slot
from conveyor.state.global_tables import GlobalTables
from conveyor.state.partition_stores import (
    OpenStores,
    PartitionStores,
    Restored,
    write_with_offset,
)
from conveyor.state.restorer import Restorer
from conveyor.state.tables import TableFollower

if TYPE_CHECKING:
    from conveyor.instrumentation import Monitor
    from conveyor.routing.topic import Topic

__all__ = ["StateSpace"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class StateSpace:
    """The stores of one app in this process (see the module)."""

    def __init__(
        self,
        state_dir: str | Path,
        kafka: Mapping[str, Any],
        client_id: str,
        monitor: Monitor | None = None,
    ) -> None:
        self.root = Path(state_dir).absolute()
        self._monitor = monitor
        self._kafka = dict(kafka)
        self._client_id = client_id
        self.open_stores = OpenStores()
        self.restorer = Restorer()
        """Opens the partitions' stores, off the workers."""
        self._slots: dict[str, Path] = {}
        self._partitions: dict[tuple[str, str, int], PartitionStores] = {}  # made, by place
        self._progress: dict[tuple[str, int, str], dict[str, int]] = {}  # restores under way
        self._last_restore: dict[tuple[str, int, str], Restored] = {}
        self.tables = TableFollower(self._reader, write_with_offset)
        """Keeps the open table partitions up to date with their topics (started when the
        first opens)."""
        self.global_tables = GlobalTables(self.open_stores, self._reader, self.tables)

    def folder(self, group: str) -> Path:
        """This process's folder for ``group``'s stores (its slot taken on first use)."""
        found = self._slots.get(group)
        if found is None:
            where = self.root / _UNSAFE.sub("_", group)
            found = where / str(slot("stores", folder=where))
            self._slots[group] = found
        return found

    def for_partition(
        self, route: Topic, topic: str, partition: int, cancelled: Callable[[], bool]
    ) -> PartitionStores:
        """The stores of ``route`` for ``topic``/``partition`` (not open yet)."""
        group = route.consumer_group
        made = PartitionStores(
            route.state,
            group=group,
            topic=topic,
            partition=partition,
            folder=self.folder(group) / _UNSAFE.sub("_", topic),
            registry=self.open_stores,
            reader=self._reader,
            cancelled=cancelled,
            on_restored=self._restored,
            on_progress=self._restoring,
            follower=self.tables,
            global_tables=self.global_tables,
        )
        self._partitions[(group, topic, partition)] = made  # the newest: a revoked one's successor
        return made

    def find(self, topic: str, partition: int, group: str | None = None) -> PartitionStores | None:
        """The open stores of ``topic``/``partition`` in this process (of ``group``, when
        given), or ``None`` when it does not have them open."""
        for (of_group, of_topic, of_partition), stores in list(self._partitions.items()):
            if (of_topic, of_partition) != (topic, partition) or group not in (None, of_group):
                continue
            if stores.opened and not stores.closed:
                return stores
        return None

    def _restoring(
        self, stores: PartitionStores, store: str, records: int, size: int, at: int, end: int
    ) -> None:
        progress = {"records": records, "offset": at, "end": end}
        self._progress[(stores.topic, stores.partition, store)] = progress
        monitor = self._monitor
        if monitor is not None and ev.STATE_RESTORING in monitor.subscribed:
            monitor.instrument(
                ev.STATE_RESTORING,
                topic=stores.topic,
                partition=stores.partition,
                store=store,
                records=records,
                bytes=size,
                offset=at,
                end=end,
            )

    def _restored(self, topic: str, partition: int, restored: Restored) -> None:
        self._progress.pop((topic, partition, restored.store), None)
        self._last_restore[(topic, partition, restored.store)] = restored
        monitor = self._monitor
        if monitor is not None and ev.STATE_RESTORED in monitor.subscribed:
            monitor.instrument(
                ev.STATE_RESTORED,
                topic=topic,
                partition=partition,
                store=restored.store,
                records=restored.records,
                bytes=restored.bytes,
                seconds=restored.seconds,
                start=restored.start,
                end=restored.end,
            )

    def reports(self) -> list[dict[str, Any]]:
        """Each store partition of this process (open, or restoring): what the web UI's
        Stores page shows of it."""
        found = []
        for (group, topic, partition), stores in list(self._partitions.items()):
            if stores.closed:
                continue
            for name, store in stores.declared.items():
                key = (topic, partition, name)
                view = stores.views.get(name)
                if view is None and key not in self._progress:
                    continue
                keys: int | None = None
                on_disk: int | None = None
                late = None if view is None else view.late
                if view is not None:
                    try:
                        keys, on_disk = view.size()
                    except Exception:  # closed meanwhile (revoked): nothing to say of it
                        continue
                last = self._last_restore.get(key)
                found.append(
                    {
                        "group": group,
                        "topic": topic,
                        "partition": partition,
                        "store": name,
                        "kind": store.kind,
                        "keys": keys,
                        "bytes": on_disk,
                        "offset": stores.offset(name),
                        "restoring": self._progress.get(key),
                        "late": late,
                        "last_restore": None if last is None else _restore_report(last),
                    }
                )
        return found

    def _reader(self) -> ConsumerClient:
        """A client that reads changelogs by assignment: committed records only, to the end."""
        settings = reader_settings(self._kafka, f"{self._client_id}-state-restore")
        settings.update(
            {
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "fetch.max.bytes": 64 << 20,
                "max.partition.fetch.bytes": 16 << 20,
                # a restore drains librdkafka's queue as fast as it fills: with the default 1 s
                # backoff once the queue holds queued.min.messages, it read 120,000 records/s
                # (and 500,000 with 10 ms)
                "fetch.queue.backoff.ms": 10,
            }
        )
        return ConsumerClient(settings)

    def close(self) -> None:
        """The app stops: close every store partition still open (files stay)."""
        self.restorer.close()
        self.tables.close()
        self.open_stores.close_all()


def _restore_report(restored: Restored) -> dict[str, Any]:
    return {
        "records": restored.records,
        "bytes": restored.bytes,
        "seconds": round(restored.seconds, 3),
    }
