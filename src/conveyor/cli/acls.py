"""``conveyor acls plan | apply``: the Kafka ACLs that leave an app's control topics (commands,
schedules, job queues, recurring tasks, the web UI's) to the app and its operators."""

from __future__ import annotations

import json

import click

from conveyor.admin.acls import Acl, ControlPlane, control_plane_acls
from conveyor.app import App
from conveyor.cli.loading import app_option, json_option, load_app
from conveyor.cli.output import console, progress, table

__all__ = ["acls", "control_plane_of"]

_app_option = app_option("The app whose control topics to guard (default: $CONVEYOR_APP).")
_principal_option = click.option(
    "--principal",
    required=True,
    metavar="TYPE:NAME",
    help="The principal the app's processes log in as (e.g. User:shop).",
)
_operator_option = click.option(
    "--operator",
    metavar="TYPE:NAME",
    help="The principal of conveyor ctl and conveyor web (sends commands, reads the UI's "
    "topics); none: only the app itself.",
)


def control_plane_of(app: App) -> ControlPlane:
    """The control topics ``app`` declares: the web UI's (when enabled), its schedules topic,
    its recurring tasks' topic and its job queues."""
    web = app.web.topics if app.web.enabled else None
    recurring = app.recurring_tasks
    return ControlPlane(
        commands=web.commands if web else None,
        web=[web.reports, web.states, web.metrics, web.errors] if web else (),
        web_group=web.group if web else None,
        schedules=app.schedules.topic if app.schedules.enabled else None,
        recurring=recurring.topic if recurring is not None else None,
        jobs=[
            name
            for queue in app.jobs.queues.values()
            for name in (queue.topic, queue.dead_topic, queue.dismissed_topic)
        ],
    )


def _planned(app_spec: str | None, principal: str, operator: str | None) -> tuple[App, list[Acl]]:
    app = load_app(app_spec)
    return app, control_plane_acls(control_plane_of(app), principal, operator)


def _table(title: str, planned: list[Acl]) -> None:
    rows = [(a.resource, a.name, a.principal, a.operation, a.permission, a.why) for a in planned]
    console.print(table(title, ["resource", "name", "principal", "operation", "", "for"], rows))


@click.group()
def acls() -> None:
    """Kafka ACLs that leave the app's control topics to the app and its operators."""


@acls.command("plan")
@_app_option
@_principal_option
@_operator_option
@json_option()
def acls_plan(app_spec: str | None, principal: str, operator: str | None, as_json: bool) -> None:
    """Show the ACLs `apply` creates (nothing is changed)."""
    _, planned = _planned(app_spec, principal, operator)
    if as_json:
        click.echo(json.dumps([acl.as_dict() for acl in planned]))
    elif not planned:
        console.print("the app declares no control topics", highlight=False)
    else:
        _table("ACLs to create", planned)


@acls.command("apply")
@_app_option
@_principal_option
@_operator_option
def acls_apply(app_spec: str | None, principal: str, operator: str | None) -> None:
    """Create the ACLs (the broker needs an authorizer, and this command's login the right to
    alter the cluster's ACLs); existing ones stay."""
    app, planned = _planned(app_spec, principal, operator)
    if not planned:
        console.print("the app declares no control topics", highlight=False)
        return
    with progress(f"creating {len(planned)} ACL(s)") as step:
        app.admin.create_acls(planned)
        step(f"created {len(planned)} ACL(s)")
    _table("ACLs created", planned)
