"""Fixtures of the integration tests: the web UI's topics under a prefix of the test's own."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest

from conveyor import Admin
from conveyor.admin import migrate
from conveyor.errors import KafkaError
from conveyor.web import WebTopics


@pytest.fixture
def web_topics(kafka_admin: Admin) -> Iterator[WebTopics]:
    """The web UI's topics, installed under a unique prefix; deleted (with the group) after."""
    topics = WebTopics.prefixed(f"webtest-{uuid.uuid4().hex[:8]}")
    for change in migrate(kafka_admin, topics.declared()):
        assert change.applied, change
    yield topics
    for name in topics.names:
        if name in kafka_admin.list_topics():
            kafka_admin.delete_topic(name)
    with contextlib.suppress(KafkaError):  # never created, or still leaving
        kafka_admin.delete_consumer_group(topics.group)
