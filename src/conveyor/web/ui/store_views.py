"""What the Stores page shows, as plain data: the state stores and tables the app's routes
declare, each store partition its processes report (where it lives, its keys and size, how far
its local copy is behind its changelog, a restore under way and the last one), and a key looked
up wherever its partition is. Nothing here knows HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from conveyor.errors import ConveyorError
from conveyor.web.aggregation.fold import process_status
from conveyor.web.ui.views import Page

if TYPE_CHECKING:
    from conveyor.admin.admin import Admin
    from conveyor.routing.host import RoutedHost
    from conveyor.web.reading.data import WebData

__all__ = ["StoreViews"]

_LAG_ROWS = 200
"""Store partitions whose changelog end is read per page (one watermark query each)."""


class StoreViews:
    """The Stores page of one app's web UI."""

    def __init__(
        self,
        app: RoutedHost,
        data: WebData,
        admin: Callable[[], Admin],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app = app
        self.data = data
        self.admin = admin
        self.clock = clock

    def page(self, target: str | None, key: str | None) -> Page:
        """The page; ``target`` (``topic/store``) and ``key``: a key to look up."""
        declared = self._declared()
        changelogs = {(d["group"], d["topic"], d["store"]): d["changelog"] for d in declared}
        partitions = self._partitions()
        problem = self._behind(partitions, changelogs)
        lookup = None
        if target and key is not None and key != "":
            lookup = self._lookup(target, key)
        return Page(
            "Stores",
            {
                "declared": declared,
                "partitions": partitions,
                "problem": problem,
                "lookup": lookup,
                "target": target or "",
                "key": key or "",
            },
        )

    def _declared(self) -> list[dict[str, Any]]:
        from conveyor.state.changelogs import changelog_topic  # noqa: PLC0415 - state is optional

        found = []
        for route in self.app.routes:
            for name, store in route.state.items():
                if store.source is not None:
                    changelog: str | None = store.source
                elif store.changelog:
                    changelog = changelog_topic(route.consumer_group, route.name, name)
                else:
                    changelog = None
                found.append(
                    {
                        "group": route.consumer_group,
                        "topic": route.name,
                        "store": name,
                        "kind": store.kind,
                        "backend": store.backend_name,
                        "changelog": changelog,
                    }
                )
        return found

    def _partitions(self) -> list[dict[str, Any]]:
        now = self.clock()
        found = []
        for process, state in self.data.states().items():
            status = process_status(state, now)
            if status in ("dead", "stopped"):
                continue
            for row in state.get("stores", ()):
                restoring = row.get("restoring")
                progress = None
                if restoring:  # what it read, over that and what is left
                    done = int(restoring["records"])
                    left = max(0, int(restoring["end"]) - int(restoring["offset"]))
                    progress = done / (done + left) if done + left else None
                found.append({**row, "process": process, "status": status, "progress": progress})
        found.sort(key=lambda r: (r["topic"], r["store"], r["partition"], r["process"]))
        return found

    def _behind(
        self, partitions: list[dict[str, Any]], changelogs: dict[tuple[str, str, str], str | None]
    ) -> str | None:
        """Each partition's changelog records its local copy lacks (end minus its offset)."""
        for row in partitions[:_LAG_ROWS]:
            changelog = changelogs.get((row["group"], row["topic"], row["store"]))
            row["changelog"] = changelog
            row["behind"] = None
            if changelog is None or row.get("offset") is None or row["kind"] == "global table":
                continue
            try:
                _low, high = self.admin().read_watermark_offsets(changelog, row["partition"])
            except ConveyorError as exc:
                return f"could not read the changelogs' ends from Kafka: {exc}"
            row["behind"] = max(0, high - int(row["offset"]))
        return None

    def _lookup(self, target: str, key: str) -> dict[str, Any]:
        topic, _, store = target.rpartition("/")
        try:
            value = self.app.stores.get(store, key, topic=topic or None)
        except ConveyorError as exc:
            return {"store": store, "topic": topic, "key": key, "error": str(exc)}
        shown = json.dumps(value, indent=2, ensure_ascii=False, default=repr)
        found = value is not None
        return {"store": store, "topic": topic, "key": key, "found": found, "value": shown}
