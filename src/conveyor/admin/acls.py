"""Kafka ACLs that keep an app's control plane to the app and its operators.

Four kinds of topic steer an app: the web UI's commands topic (quiet, stop, seek, probe every
process), the schedules topic (a record there makes the app produce to the topic it names),
job queues (a record there runs a job function with its arguments) and the recurring tasks'
topic; the web UI's other topics hold what the UI shows. :func:`control_plane_acls` lists the
bindings that allow the app's principal and, optionally, an operator's (``conveyor ctl``,
``conveyor web``, whose actions write to them too) onto them and nobody else: once a resource has an ACL, Kafka's authorizer
lets only the principals its ACLs name. ``conveyor acls plan`` prints them, ``conveyor acls
apply`` creates them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from conveyor.errors import ConfigurationError

__all__ = ["Acl", "ControlPlane", "check_principal", "control_plane_acls"]

_PRINCIPAL = re.compile(r"^[A-Za-z]+:.+$")


@dataclass(frozen=True)
class Acl:
    """One ACL binding: ``principal`` may (``allow``) do ``operation`` on the ``resource``
    (``topic``, ``group``) named ``name``; ``why`` says what it is for."""

    resource: str
    name: str
    principal: str
    operation: str
    why: str = ""
    pattern: str = "literal"
    permission: str = "allow"
    host: str = "*"

    def binding(self) -> tuple[str, str, str, str, str, str, str]:
        """As Kafka names its parts (``TOPIC``, ``LITERAL``, ``READ``, ``ALLOW`` ...)."""
        return (
            self.resource.upper(),
            self.name,
            self.pattern.upper(),
            self.principal,
            self.host,
            self.operation.upper(),
            self.permission.upper(),
        )

    def as_dict(self) -> dict[str, str]:
        return {
            "resource": self.resource,
            "name": self.name,
            "pattern": self.pattern,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation,
            "permission": self.permission,
            "why": self.why,
        }


@dataclass(frozen=True)
class ControlPlane:
    """An app's control topics, by what they are (names; empty when the app has none)."""

    commands: str | None = None
    web: Sequence[str] = ()
    """The web UI's other topics (reports, states, metrics, errors)."""
    web_group: str | None = None
    schedules: str | None = None
    recurring: str | None = None
    jobs: Sequence[str] = ()


def check_principal(principal: str, name: str) -> str:
    """``User:shop``-style principals only (Kafka's type, a colon, a name).

    Raises:
        ConfigurationError: naming the option.
    """
    if not isinstance(principal, str) or not _PRINCIPAL.match(principal):
        raise ConfigurationError(
            f"{name} must be a Kafka principal such as User:shop, got {principal!r}", name
        )
    return principal


def control_plane_acls(
    plane: ControlPlane, principal: str, operator: str | None = None
) -> list[Acl]:
    """The ACLs that leave the app's control topics to ``principal`` (the app's processes)
    and ``operator`` (who sends commands and reads the web UI's topics), in a stable order.

    Raises:
        ConfigurationError: a malformed principal.
    """
    check_principal(principal, "principal")
    if operator is not None:
        check_principal(operator, "operator")
    acls: list[Acl] = []

    def allow(topics: Iterable[str | None], who: str, operations: Sequence[str], why: str) -> None:
        for topic in topics:
            if topic:
                acls.extend(Acl("topic", topic, who, op, why) for op in operations)

    ops = ("read", "write", "describe")
    allow([plane.commands], principal, ops, "reads commands, writes its answers")
    allow(plane.web, principal, ops, "reports its state, aggregates the reports")
    allow([plane.schedules], principal, ops, "loads schedules, tombstones them when sent")
    allow([plane.recurring], principal, ops, "records each recurring run")
    allow(plane.jobs, principal, ops, "runs jobs, retries them, writes dead ones")
    if operator is not None:  # the web UI's actions write where the app does
        allow([plane.commands], operator, ops, "sends commands, reads their answers")
        allow(plane.web, operator, ops, "the web UI's pages; `conveyor web` aggregates")
        allow([plane.schedules], operator, ops, "the schedules page; cancelling one")
        allow([plane.recurring], operator, ops, "the recurring page; run, enable, disable")
        allow(plane.jobs, operator, ops, "the jobs pages; redriving, discarding dead jobs")
    if plane.web_group:
        for who in (principal, *((operator,) if operator else ())):
            acls.append(Acl("group", plane.web_group, who, "read", "aggregates the reports"))
    unique: dict[tuple[str, ...], Acl] = {}
    for acl in acls:
        unique.setdefault(acl.binding(), acl)
    return list(unique.values())
