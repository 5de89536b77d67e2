"""The web UI's topic names."""

from __future__ import annotations

import pytest

from conveyor.web import WebTopics


@pytest.mark.parametrize("prefix", ["staging", "staging_"])
def test_a_prefix_names_every_topic_and_the_group_once(prefix: str) -> None:
    topics = WebTopics.prefixed(prefix)
    assert topics.names == (
        "staging_consumers_reports",
        "staging_consumers_states",
        "staging_consumers_metrics",
        "staging_errors",
        "staging_consumers_commands",
    )
    assert topics.group == "staging_web"


@pytest.mark.parametrize("prefix", ["", "_"])
def test_an_empty_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="needs a prefix"):
        WebTopics.prefixed(prefix)
