"""The RPC server's reply cache: a repeated request id is answered from it, for ``ttl``
seconds, at most ``size`` replies, and what it keeps costs what the replies weigh."""

from __future__ import annotations

import os
import tracemalloc
from types import SimpleNamespace

import pytest

import conveyor.rpc.handlers as handlers_module
from conveyor.rpc.handlers import JSON, ReplyCache


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The cache's monotonic clock, set by the test."""
    now = SimpleNamespace(value=1000.0)
    monkeypatch.setattr(handlers_module, "time", SimpleNamespace(monotonic=lambda: now.value))
    return now


def test_a_reply_is_answered_until_its_ttl_passes(clock: SimpleNamespace) -> None:
    cache = ReplyCache(ttl=10.0)
    cache.put("add\x00id-1", b'{"id":"id-1","ok":3}')
    clock.value += 9.9
    assert cache.get("add\x00id-1") == b'{"id":"id-1","ok":3}'
    assert cache.get("add\x00id-2") is None
    clock.value += 0.2
    assert cache.get("add\x00id-1") is None


def test_at_most_size_replies_are_kept_the_oldest_leaving_first(clock: SimpleNamespace) -> None:
    cache = ReplyCache(ttl=60.0, size=3)
    for index in range(5):
        cache.put(f"id-{index}", b"%d" % index)
    assert [cache.get(f"id-{index}") for index in range(5)] == [None, None, b"2", b"3", b"4"]


def test_cached_replies_weigh_what_the_replies_weigh() -> None:
    # orjson (3.12 and later) returns even a 60-byte result in a 4 KB buffer it never
    # shrinks; kept as they came, 2,000 replies held ~8 MB instead of ~0.3 MB.
    cache = ReplyCache(ttl=60.0, size=10_000)
    replies = 2_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for index in range(replies):
            call_id = os.urandom(16).hex()
            cache.put(f"echo\x00{call_id}", JSON.encode({"id": call_id, "ok": index}))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held / replies < 1_000, f"{held / replies:.0f} bytes held per cached reply"
