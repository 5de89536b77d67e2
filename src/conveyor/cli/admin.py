"""``conveyor topics | groups | configs | cluster``: administration from the command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

import click
from rich.markup import escape

from conveyor.admin import Admin, align, migrate, plan
from conveyor.admin.admin import Replication
from conveyor.app import App
from conveyor.cli.loading import app_option, json_option, kafka_without_app, load_app
from conveyor.cli.output import changes_table, confirm, console, key_value_table, table, warn
from conveyor.errors import ConfigurationError, ConveyorError

__all__ = ["cluster", "configs", "groups", "topics"]

_app_option = app_option(
    "The app whose kafka settings (and routes) to use (default: $CONVEYOR_APP; commands "
    "that need no routes fall back to $KAFKA_BOOTSTRAP_SERVERS)."
)
_yes_option = click.option("--yes", is_flag=True, help="Do not ask for confirmation.")


def _app(spec: str | None) -> App:
    return load_app(spec)


def _admin(spec: str | None) -> Admin:
    """The app's admin client; without an app, one for ``$KAFKA_BOOTSTRAP_SERVERS`` (a command
    that needs no routes, such as ``topics create``, should not need an app to be written)."""
    if spec:
        return load_app(spec).admin
    kafka = kafka_without_app()
    if not kafka.get("bootstrap.servers"):
        raise ConfigurationError(
            "no app given: pass --app module:attribute (e.g. shop.app:app), set CONVEYOR_APP, "
            "or set KAFKA_BOOTSTRAP_SERVERS (this command needs no routes)",
            "app",
        )
    return Admin(kafka)  # with CONVEYOR_KAFKA_* too: the credentials of a secured cluster


def _emit(as_json: bool, data: Any, render: Callable[[], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, default=str))
    else:
        render()


def _pairs(items: tuple[str, ...], hint: str) -> list[tuple[str, str]]:
    """``KEY=VALUE`` arguments as pairs (an item without ``=`` or a key is refused)."""
    pairs = []
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=hint)
        pairs.append((key, value))
    return pairs


def _config_changes(
    settings: tuple[str, ...],
    resets: tuple[str, ...],
    appends: tuple[str, ...],
    subtracts: tuple[str, ...],
) -> dict[str, Any]:
    """``Admin.alter_configs``'s arguments from the command line's: KEY=VALUE sets, --reset
    KEY deletes an override, --append / --subtract KEY=VALUE add items to and remove them from
    a list config (repeated for one KEY, its items gather)."""
    changes: dict[str, str | None] = dict(_pairs(settings, "KEY=VALUE"))
    for key in resets:
        if key in changes:
            raise click.BadParameter(f"{key!r} is both set and reset", param_hint="--reset")
        changes[key] = None
    lists: dict[str, dict[str, list[str]]] = {"append": {}, "subtract": {}}
    for option, items in (("append", appends), ("subtract", subtracts)):
        for key, value in _pairs(items, f"--{option}"):
            if key in changes or (option == "subtract" and key in lists["append"]):
                raise click.BadParameter(
                    f"{key!r} is changed twice: one operation per config a call",
                    param_hint=f"--{option}",
                )
            lists[option].setdefault(key, []).append(value)
    if not changes and not any(lists.values()):
        raise click.UsageError(
            "nothing to change: give KEY=VALUE settings, --reset KEY, --append KEY=VALUE or "
            "--subtract KEY=VALUE"
        )
    return {"changes": changes or None, **{k: v or None for k, v in lists.items()}}


def _altered(kind: str, name: str, as_json: bool, done: list[Any]) -> None:
    _emit(
        as_json,
        [change.__dict__ for change in done],
        lambda: console.print(
            table(
                f"{kind} {name} configs altered",
                ["name", "before", "after", "source"],
                [(c.name, str(c.before), str(c.after), c.source) for c in done],
            )
        ),
    )


_reset_option = click.option(
    "--reset",
    "resets",
    multiple=True,
    metavar="KEY",
    help="Delete KEY's override: back to the broker's or cluster's default (repeatable).",
)
_append_option = click.option(
    "--append",
    "appends",
    multiple=True,
    metavar="KEY=VALUE",
    help="Add VALUE (an item, or items separated by commas) to the list config KEY, such as "
    "cleanup.policy=compact; the list's other items stay (repeatable).",
)
_subtract_option = click.option(
    "--subtract",
    "subtracts",
    multiple=True,
    metavar="KEY=VALUE",
    help="Remove VALUE's items from the list config KEY; the others stay (repeatable).",
)


# -- topics -------------------------------------------------------------------------------------


@click.group()
def topics() -> None:
    """Topics: declarative plan/migrate/align from the routes, and direct changes."""


@topics.command("plan")
@_app_option
@json_option()
def topics_plan(app_spec: str | None, as_json: bool) -> None:
    """Show what migrate would change: + create, ~ change, ! impossible."""
    app = _app(app_spec)
    changes = plan(app.admin, app.routes)
    _emit(
        as_json, [c.as_dict() for c in changes], lambda: changes_table("Plan", changes, done=False)
    )


def _apply(
    app_spec: str | None, as_json: bool, configs_only: bool, registry_url: str | None = None
) -> None:
    app = _app(app_spec)
    registry = None
    if registry_url:  # the models first: an incompatible one stops the migration
        from conveyor.cli.schemas import schemas_table  # noqa: PLC0415 - the schemas extra
        from conveyor.schemas import SchemaRegistry  # noqa: PLC0415
        from conveyor.schemas.models import FAILED, INCOMPATIBLE, check_models  # noqa: PLC0415

        registry = SchemaRegistry(registry_url)
        checked = check_models(registry, app.routes)
        refused = [entry for entry in checked if entry.state in (INCOMPATIBLE, FAILED)]
        if refused:
            registry.close()
            if as_json:
                click.echo(json.dumps({"schemas": [entry.as_dict() for entry in checked]}))
            else:
                schemas_table("Compatibility (nothing migrated)", checked)
            sys.exit(1)
    changes = align(app.admin, app.routes) if configs_only else migrate(app.admin, app.routes)
    registered = []
    if registry is not None:
        from conveyor.cli.schemas import schemas_table  # noqa: PLC0415 - the schemas extra
        from conveyor.schemas.models import register_models  # noqa: PLC0415

        with registry:
            registered = register_models(registry, app.routes)
    if as_json:
        data: Any = [c.as_dict() for c in changes]
        if registry is not None:
            data = {"changes": data, "schemas": [entry.as_dict() for entry in registered]}
        click.echo(json.dumps(data, default=str))
    else:
        changes_table("Align" if configs_only else "Migrate", changes, done=True)
        if registry is not None:
            schemas_table("Schemas", registered)
    if any(change.error for change in changes) or any(e.state == "failed" for e in registered):
        sys.exit(1)


@topics.command("migrate")
@_app_option
@json_option()
@click.option(
    "--schema-registry",
    "registry_url",
    envvar="CONVEYOR_SCHEMA_REGISTRY",
    metavar="URL",
    help="Check the models' JSON Schemas there first (nothing is "
    "migrated when one is not compatible) and register them after.",
)
def topics_migrate(app_spec: str | None, as_json: bool, registry_url: str | None) -> None:
    """Create declared topics, grow partitions, align configs (never deletes)."""
    _apply(app_spec, as_json, configs_only=False, registry_url=registry_url)


@topics.command("align")
@_app_option
@json_option()
def topics_align(app_spec: str | None, as_json: bool) -> None:
    """Apply config changes only."""
    _apply(app_spec, as_json, configs_only=True)


@topics.command("list")
@_app_option
@json_option()
@click.option("--internal", is_flag=True, help="Include internal topics (__consumer_offsets ...).")
def topics_list(app_spec: str | None, as_json: bool, internal: bool) -> None:
    """List the cluster's topics with their partition counts."""
    counts = _admin(app_spec).partition_counts()  # one metadata request: no topic vanishes
    rows = sorted(  # between listing it and asking its partitions
        (name, count) for name, count in counts.items() if internal or not name.startswith("__")
    )
    _emit(
        as_json,
        [{"topic": n, "partitions": p} for n, p in rows],
        lambda: console.print(
            table("Topics", ["topic", "partitions"], [(n, str(p)) for n, p in rows])
        ),
    )


@topics.command("describe")
@_app_option
@json_option()
@click.argument("name")
def topics_describe(app_spec: str | None, as_json: bool, name: str) -> None:
    """Partitions (leader, replicas, watermarks, share) and non-default configs of a topic."""
    admin = _admin(app_spec)
    info = admin.topic_info(name)
    load = {row.partition: row for row in admin.partition_distribution(name)}
    configs = {
        k: v.value for k, v in admin.describe_configs("topic", name).items() if not v.default
    }
    partitions: list[dict[str, Any]] = []
    for p in info.partitions:
        low, high = admin.read_watermark_offsets(name, p.partition)
        partitions.append(
            {
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "low": low,
                "high": high,
                "share": round(load[p.partition].share, 4),
                "from_mean": round(load[p.partition].from_mean, 4),
            }
        )

    def render() -> None:
        console.print(
            table(
                f"Topic {name}",
                ["partition", "leader", "replicas", "low", "high", "share", "vs mean"],
                [
                    (
                        str(r["partition"]),
                        str(r["leader"]),
                        ",".join(map(str, r["replicas"])),
                        str(r["low"]),
                        str(r["high"]),
                        f"{r['share']:.1%}",
                        f"{r['from_mean']:+.0%}",
                    )
                    for r in partitions
                ],
            )
        )
        console.print(
            key_value_table(
                "Configs set on the topic", sorted((k, str(v)) for k, v in configs.items())
            )
        )

    _emit(as_json, {"topic": name, "partitions": partitions, "configs": configs}, render)


@topics.command("create")
@_app_option
@click.argument("name")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    default=None,
    help="Replicas of each partition (default: the cluster's default.replication.factor).",
)
@click.option(
    "--config", "settings", multiple=True, metavar="KEY=VALUE", help="A topic config (repeatable)."
)
def topics_create(
    app_spec: str | None,
    name: str,
    partitions: int,
    replication_factor: int | None,
    settings: tuple[str, ...],
) -> None:
    """Create a topic."""
    config = dict(item.split("=", 1) for item in settings if "=" in item)
    admin = _admin(app_spec)
    admin.create_topic(name, partitions, replication_factor, config)
    info = admin.topic_info(name)
    replicas = len(info.partitions[0].replicas) if info.partitions else 0
    console.print(
        f"created {name} ({partitions} partition(s), {replicas} replica(s))", highlight=False
    )
    brokers = len(admin.cluster_info().brokers)
    if Replication(brokers, None).under_replicated(replicas):
        warn(
            f"{name} has one replica on a cluster of {brokers} brokers: its data is lost with "
            "that broker (omit --replication-factor for the cluster's default, or pass 3)"
        )


@topics.command("delete")
@_app_option
@_yes_option
@click.argument("name")
def topics_delete(app_spec: str | None, yes: bool, name: str) -> None:
    """Delete a topic and all its messages."""
    confirm(yes, f"Delete topic {name} and all its messages?")
    _admin(app_spec).delete_topic(name)
    console.print(f"deleted {name}", highlight=False)


@topics.command("repartition")
@_app_option
@click.argument("name")
@click.argument("total", type=click.IntRange(min=1))
def topics_repartition(app_spec: str | None, name: str, total: int) -> None:
    """Grow a topic to TOTAL partitions (Kafka cannot shrink one)."""
    _admin(app_spec).create_partitions(name, total)
    console.print(f"{name} now has {total} partitions", highlight=False)


@topics.command("alter")
@_app_option
@json_option()
@click.argument("name")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=None,
    help="Grow the topic to this many partitions (Kafka cannot shrink one; the same "
    "count changes nothing).",
)
@click.option(
    "--config", "settings", multiple=True, metavar="KEY=VALUE", help="Set a config (repeatable)."
)
@_reset_option
@_append_option
@_subtract_option
def topics_alter(
    app_spec: str | None,
    as_json: bool,
    name: str,
    partitions: int | None,
    settings: tuple[str, ...],
    resets: tuple[str, ...],
    appends: tuple[str, ...],
    subtracts: tuple[str, ...],
) -> None:
    """Change topic NAME: grow its partitions and change its configs (the ones not named keep
    their values), e.g. conveyor topics alter orders --partitions 12 --config
    retention.ms=86400000 --append cleanup.policy=compact."""
    if partitions is None and not (settings or resets or appends or subtracts):
        raise click.UsageError(
            "nothing to change: give --partitions N, --config KEY=VALUE, --reset KEY, "
            "--append KEY=VALUE or --subtract KEY=VALUE"
        )
    arguments = (
        _config_changes(settings, resets, appends, subtracts)
        if settings or resets or appends or subtracts
        else None
    )
    admin = _admin(app_spec)
    before = admin.topic_info(name).partition_count  # an unknown topic fails here, named
    if partitions is not None and partitions < before:
        raise click.BadParameter(
            f"{name} has {before} partitions: Kafka cannot shrink a topic (delete and create "
            "it again to have fewer, losing its messages)",
            param_hint="--partitions",
        )
    done = [] if arguments is None else admin.alter_configs("topic", name, **arguments)
    after = before if partitions is None else partitions
    grown = after > before
    if grown:
        admin.create_partitions(name, after)
    data = {
        "topic": name,
        "partitions": {"before": before, "after": after},
        "configs": [change.__dict__ for change in done],
    }

    def render() -> None:
        console.print(
            f"{name}: {before} → {after} partitions"
            if grown
            else f"{name}: {before} partitions (unchanged)",
            highlight=False,
        )
        if done:
            _altered("topic", name, False, done)

    _emit(as_json, data, render)


@topics.command("reset")
@_app_option
@_yes_option
def topics_reset(app_spec: str | None, yes: bool) -> None:
    """Delete the app's declared topics and create them again as declared (all data is lost)."""
    app = _app(app_spec)
    names = sorted({route.name for route in app.routes})
    confirm(yes, f"Delete and recreate {', '.join(names)}? All their messages will be lost.")
    existing = set(app.admin.list_topics())
    for name in names:
        if name in existing:
            app.admin.delete_topic(name)
    changes = migrate(app.admin, app.routes)
    changes_table("Reset", changes, done=True)


# -- groups -------------------------------------------------------------------------------------


@click.group()
def groups() -> None:
    """Consumer groups: list, describe, lags, seek."""


@groups.command("list")
@_app_option
@json_option()
def groups_list(app_spec: str | None, as_json: bool) -> None:
    """List consumer groups with their state and member count."""
    admin = _admin(app_spec)
    infos = [admin.describe_consumer_group(name) for name in admin.list_consumer_groups()]
    _emit(
        as_json,
        [{"group": g.name, "state": g.state, "members": len(g.members)} for g in infos],
        lambda: console.print(
            table(
                "Consumer groups",
                ["group", "state", "members"],
                [(g.name, g.state, str(len(g.members))) for g in infos],
            )
        ),
    )


@groups.command("describe")
@_app_option
@json_option()
@click.argument("name")
def groups_describe(app_spec: str | None, as_json: bool, name: str) -> None:
    """A group's members and their partitions."""
    group = _admin(app_spec).describe_consumer_group(name)
    if group.state == "DEAD" and not group.members:
        raise ConveyorError(
            f"there is no consumer group {name!r} (`conveyor groups list` lists them)"
        )
    rows = [
        (m.client_id, m.host, ", ".join(f"{t}/{p}" for t, p in m.assignment)) for m in group.members
    ]
    _emit(
        as_json,
        {
            "group": group.name,
            "state": group.state,
            "members": [{"client_id": c, "host": h, "partitions": a} for c, h, a in rows],
        },
        lambda: console.print(
            table(f"Group {group.name} ({group.state})", ["client", "host", "partitions"], rows)
        ),
    )


@groups.command("lags")
@_app_option
@json_option()
@click.argument("names", nargs=-1)
def groups_lags(app_spec: str | None, as_json: bool, names: tuple[str, ...]) -> None:
    """Committed offset (and its metadata), high watermark and lag per partition (all groups,
    or NAMES)."""
    lags = _admin(app_spec).read_lags(list(names) or None)
    _emit(
        as_json,
        [lag.__dict__ for lag in lags],
        lambda: console.print(
            table(
                "Lags",
                ["group", "topic", "partition", "committed", "high", "lag", "metadata"],
                [
                    (
                        lag.group,
                        lag.topic,
                        str(lag.partition),
                        "-" if lag.committed is None else str(lag.committed),
                        str(lag.high_watermark),
                        str(lag.lag),
                        escape(lag.metadata or ""),
                    )
                    for lag in lags
                ],
            )
        ),
    )


@groups.command("seek")
@_app_option
@_yes_option
@click.argument("name")
@click.argument("topic")
@click.argument("position")
@click.option(
    "--partition",
    "partitions",
    type=int,
    multiple=True,
    help="Only these partitions (default all).",
)
def groups_seek(
    app_spec: str | None,
    yes: bool,
    name: str,
    topic: str,
    position: str,
    partitions: tuple[int, ...],
) -> None:
    """Move group NAME on TOPIC to POSITION: an offset, earliest, latest or an ISO time."""
    admin = _admin(app_spec)
    target: Any
    if position in ("earliest", "latest"):
        target = position
    elif position.isdigit():
        target = int(position)
    else:
        try:
            target = datetime.fromisoformat(position)
        except ValueError:
            raise click.BadParameter(
                "use an offset, earliest, latest or an ISO time with a zone", param_hint="POSITION"
            ) from None
    chosen = list(partitions) or [p.partition for p in admin.topic_info(topic).partitions]
    confirm(yes, f"Move group {name} on {topic} partitions {chosen} to {position}?")
    moved = admin.seek_consumer_group(name, {topic: dict.fromkeys(chosen, target)})
    console.print(
        table(
            f"Group {name} moved",
            ["topic", "partition", "offset"],
            [(t, str(p), str(o)) for (t, p), o in sorted(moved.items())],
        )
    )


# -- configs and cluster ---------------------------------------------------------------------------


@click.group()
def configs() -> None:
    """Topic and broker configs."""


@configs.command("describe")
@_app_option
@json_option()
@click.argument("kind", type=click.Choice(["topic", "broker"]))
@click.argument("name")
@click.option("--all", "show_all", is_flag=True, help="Also list entries at their defaults.")
def configs_describe(
    app_spec: str | None, as_json: bool, kind: str, name: str, show_all: bool
) -> None:
    """The configs of topic NAME or broker ID (non-default ones unless --all)."""
    entries = _admin(app_spec).describe_configs(kind, name)
    shown = [e for e in entries.values() if show_all or not e.default]
    _emit(
        as_json,
        [e.__dict__ for e in shown],
        lambda: console.print(
            table(
                f"{kind} {name} configs",
                ["name", "value", "default", "read-only", "source"],
                [
                    (
                        e.name,
                        "***" if e.sensitive else str(e.value),
                        "yes" if e.default else "",
                        "yes" if e.read_only else "",
                        e.source,
                    )
                    for e in shown
                ],
            )
        ),
    )


@configs.command("alter")
@_app_option
@json_option()
@click.argument("kind", type=click.Choice(["topic", "broker"]))
@click.argument("name")
@click.argument("settings", nargs=-1, metavar="[KEY=VALUE]...")
@_reset_option
@_append_option
@_subtract_option
def configs_alter(
    app_spec: str | None,
    as_json: bool,
    kind: str,
    name: str,
    settings: tuple[str, ...],
    resets: tuple[str, ...],
    appends: tuple[str, ...],
    subtracts: tuple[str, ...],
) -> None:
    """Change configs of topic NAME or broker ID incrementally; the others keep their values.

    A broker's dynamic configs change without a restart: conveyor configs alter broker 1
    log.cleaner.threads=2, and --reset log.cleaner.threads sets it back. A list config gains
    or loses items with --append / --subtract: conveyor configs alter topic orders
    --append cleanup.policy=compact.
    """
    arguments = _config_changes(settings, resets, appends, subtracts)
    done = _admin(app_spec).alter_configs(kind, name, **arguments)
    _altered(kind, name, as_json, done)


@click.group()
def cluster() -> None:
    """The cluster."""


@cluster.command("info")
@_app_option
@json_option()
def cluster_info(app_spec: str | None, as_json: bool) -> None:
    """Cluster id, controller and brokers."""
    info = _admin(app_spec).cluster_info()
    _emit(
        as_json,
        {
            "cluster_id": info.cluster_id,
            "controller_id": info.controller_id,
            "brokers": [{"id": b.id, "address": b.address} for b in info.brokers],
        },
        lambda: console.print(
            table(
                f"Cluster {info.cluster_id} (controller {info.controller_id})",
                ["broker", "address"],
                [(str(b.id), b.address) for b in info.brokers],
            )
        ),
    )
