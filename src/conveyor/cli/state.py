"""``conveyor state list | get | rebuild``: an app's state stores, a key's value as the
changelog holds it, and a rebuild of this host's local copy from the changelog."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.progress import Progress

from conveyor.cli.loading import app_option, json_option, load_app
from conveyor.cli.output import confirm, console, table
from conveyor.driver.consumers import ConsumerClient
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.iterator.scan import reader_settings
from conveyor.producer.partitioners import partitioner_for

__all__ = ["state"]

_app_option = app_option("The app whose stores to look at (default: $CONVEYOR_APP).")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")  # as the stores' folders are named


@click.group()
def state() -> None:
    """State stores: list them, read a key from a changelog, rebuild a local copy."""


def _stores(app: Any) -> Iterator[tuple[Any, str, Any]]:
    """(route, store name, store) for every store and table of the app's routes."""
    for route in app.routes:
        for name, store in route.state.items():
            yield route, name, store


def _changelog(route: Any, name: str, store: Any) -> str | None:
    from conveyor.state.changelogs import changelog_topic  # noqa: PLC0415 - state is optional

    if store.source is not None:
        return str(store.source)
    return changelog_topic(route.consumer_group, route.name, name) if store.changelog else None


def _kind(store: Any) -> str:
    if store.source is None:
        return "store"
    return "global table" if store.global_table else "table"


def _folders(app: Any, route: Any, name: str, store: Any) -> list[Path]:
    """This host's folders of ``name`` on ``route``, over every process slot."""
    root = Path(app.settings.state_dir).absolute() / _UNSAFE.sub("_", route.consumer_group)
    where = "_global" if store.global_table else _UNSAFE.sub("_", route.name)
    return sorted(root.glob(f"[0-9]*/{where}/{name}"))


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


@state.command("list")
@_app_option
@json_option()
def state_list(app_spec: str | None, as_json: bool) -> None:
    """The app's stores and tables: their changelogs, records and this host's local copies."""
    app = load_app(app_spec)
    admin = app.admin
    rows: list[dict[str, Any]] = []
    for route, name, store in _stores(app):
        changelog = _changelog(route, name, store)
        try:
            records = admin.message_count(changelog) if changelog else None
        except ConveyorError:  # not created yet
            records = None
        folders = _folders(app, route, name, store)
        rows.append(
            {
                "topic": route.name,
                "store": name,
                "kind": _kind(store),
                "backend": store.backend_name,
                "changelog": changelog,
                "records": records,
                "local_bytes": sum(_size(folder) for folder in folders),
                "local_folders": [str(folder) for folder in folders],
            }
        )
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        console.print("The app declares no state store.")
        return
    console.print(
        table(
            f"State stores of {app.settings.client_id}",
            ["topic", "store", "kind", "backend", "changelog", "records", "here"],
            [
                (
                    row["topic"],
                    row["store"],
                    row["kind"],
                    row["backend"],
                    row["changelog"] or "(none)",
                    "-" if row["records"] is None else f"{row['records']:,}",
                    f"{row['local_bytes']:,} B" if row["local_folders"] else "-",
                )
                for row in rows
            ],
        )
    )


def _read_last(
    app: Any, changelog: str, partition: int, raw_key: bytes
) -> tuple[bytes | None, bool]:
    """The last value of ``raw_key`` in ``changelog``/``partition`` (read committed, with
    progress), and whether the key was there at all."""
    low, high = app.admin.read_watermark_offsets(changelog, partition)
    settings = reader_settings(app.settings.kafka, f"{app.settings.client_id}-state-get")
    settings.update({"isolation.level": "read_committed", "enable.partition.eof": True})
    reader = ConsumerClient(settings)
    value: bytes | None = None
    found = False
    try:
        reader.assign([(changelog, partition, low)])
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task(f"reading {changelog}/{partition}", total=max(1, high - low))
            done = low >= high
            while not done:
                for message in reader.poll_batch(1.0, 10_000):
                    if message.error() is not None:
                        done = done or reader.fetch_error(message)
                        continue
                    if message.key() == raw_key:
                        value, found = message.value(), True
                    reached = (message.offset() or 0) + 1
                    progress.update(task, completed=reached - low)
                    done = done or reached >= high
    finally:
        reader.close()
    return value, found


def _find(app: Any, name: str, topic: str | None) -> tuple[Any, Any]:
    found = [
        (route, store)
        for route, store_name, store in _stores(app)
        if store_name == name and (topic is None or route.name == topic)
    ]
    if not found:
        known = ", ".join(sorted({n for _, n, _ in _stores(app)})) or "none"
        raise ConfigurationError(f"the app has no store {name!r} (its stores: {known})", "store")
    if len(found) > 1:
        topics = ", ".join(route.name for route, _ in found)
        raise ConfigurationError(
            f"store {name!r} is on several topics ({topics}): name one with --topic", "topic"
        )
    return found[0]


@state.command("get")
@click.argument("store_name", metavar="STORE")
@click.argument("key")
@click.option("--topic", help="The route's topic, when several declare the store.")
@click.option(
    "--partition",
    type=int,
    help="The key's partition (default: as the app's partitioner setting places it).",
)
@_app_option
@json_option("Print the value as JSON.")
def state_get(
    store_name: str,
    key: str,
    topic: str | None,
    partition: int | None,
    app_spec: str | None,
    as_json: bool,
) -> None:
    """KEY's value in STORE, as its changelog holds it (what the owning process flushed or
    committed last): read from the changelog partition of the key's partition, no running
    app needed. Keys are given as text (stores with ``keys="str"``)."""
    app = load_app(app_spec)
    route, store = _find(app, store_name, topic)
    if store.keys != "str":
        raise ConfigurationError(
            f"store {store_name!r} has {store.keys} keys: give str keys", "key"
        )
    changelog = _changelog(route, store_name, store)
    if changelog is None:
        raise ConfigurationError(f"store {store_name!r} has no changelog to read", "store")
    raw_key = store.key_codec.encode(key)
    partitions = app.admin.partition_counts().get(changelog)
    if partitions is None:
        raise ConfigurationError(f"the changelog {changelog} does not exist yet", "store")
    if partition is None:
        placed_by = str(app.settings.kafka.get("partitioner", "consistent_random"))
        partition = partitioner_for(placed_by)(raw_key, partitions)
    elif not 0 <= partition < partitions:
        raise ConfigurationError(
            f"--partition {partition}: {changelog} has partitions 0-{partitions - 1}", "partition"
        )
    value, found = _read_last(app, changelog, partition, raw_key)
    decoded = None if value is None else store.codec.decode(value)
    if as_json:
        found_value = found and value is not None
        answer = {"store": store_name, "key": key, "found": found_value, "value": decoded}
        click.echo(json.dumps({**answer, "partition": partition}, default=repr))
        return
    if not found or value is None:
        console.print(f"{key!r} is not in {store_name} (partition {partition})")
        return
    console.print(decoded)


@state.command("rebuild")
@click.argument("store_name", metavar="STORE")
@click.option("--topic", help="The route's topic, when several declare the store.")
@click.option("--partition", type=int, help="Only this partition's copy (default: all).")
@click.option("--yes", is_flag=True, help="Do not ask before deleting.")
@_app_option
def state_rebuild(
    store_name: str, topic: str | None, partition: int | None, yes: bool, app_spec: str | None
) -> None:
    """Delete this host's local copy of STORE so that the next start restores it from its
    changelog (a copy that disagrees with it, a disk to free). Refused while a process of
    the app runs here: stop it first."""
    app = load_app(app_spec)
    route, store = _find(app, store_name, topic)
    folders = _folders(app, route, store_name, store)
    if partition is not None:
        folders = [
            folder / str(partition) for folder in folders if (folder / str(partition)).exists()
        ]
    if not folders:
        console.print(f"No local copy of {store_name} on this host: nothing to rebuild.")
        return
    for folder in folders:
        slot_folder = folder.parents[1] if partition is None else folder.parents[2]
        _refuse_if_running(slot_folder)
    confirm(yes, f"Delete {len(folders)} local folder(s) of {store_name}?")
    for folder in folders:
        shutil.rmtree(folder)
        console.print(f"deleted {folder}")
    console.print("The next start restores them from the changelog.")


def _refuse_if_running(slot_folder: Path) -> None:
    """A live process holds its slot's lock file (``stores.<n>.lock`` beside the folder)."""
    lock = slot_folder.parent / f"stores.{slot_folder.name}.lock"
    if not lock.exists():
        return
    descriptor = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ConfigurationError(
            f"a process of the app runs on this host with {slot_folder}: stop it first",
            "state",
        ) from None
    finally:
        os.close(descriptor)
