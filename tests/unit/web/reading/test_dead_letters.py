"""Dead letter queues: which topics are DLQs (declared by routes, or named so), and a DLQ's
messages grouped by original topic, partition and error class from their headers."""

from __future__ import annotations

from conveyor.web.reading.dead_letters import dead_letter_topics, group_dead_letters, read
from unit.processing.fakes import FakeRaw


def test_dlqs_are_declared_by_routes_or_named_so() -> None:
    found = dead_letter_topics(
        {"orders_failed": ["orders"], "payments.dlq": ["payments", "refunds"], "gone_dlq": ["x"]},
        ["orders", "orders_failed", "payments.dlq", "Billing-DLQ", "audit_dead_letter",
         "deadletters", "__consumer_offsets_dlq", "dlqueue-notes", "plain"],
    )  # fmt: skip
    by_name = {entry["name"]: entry for entry in found}
    assert by_name["orders_failed"] == {
        "name": "orders_failed",
        "sources": ["orders"],
        "by": "routes",
        "exists": True,
    }
    assert by_name["payments.dlq"]["sources"] == ["payments", "refunds"]
    assert by_name["gone_dlq"]["exists"] is False, "declared but not created yet"
    assert {n for n, e in by_name.items() if e["by"] == "name"} == {
        "Billing-DLQ",
        "audit_dead_letter",
        "deadletters",
        "dlqueue-notes",
    }
    assert "plain" not in by_name
    assert "__consumer_offsets_dlq" not in by_name, "internal topics are not DLQs"
    assert [entry["name"] for entry in found] == sorted(by_name)


def letter(offset: int, topic: str, partition: int, error: str, message: str = "boom") -> object:
    return FakeRaw(
        offset, topic="orders_dlq", value=b"{}", key=b"k",
        headers=[("original_topic", topic.encode()), ("original_partition", str(partition).encode()),
                 ("original_offset", b"40"), ("original_error_class", error.encode()),
                 ("original_error_message", message.encode()), ("original_attempts", b"3")],
        timestamp=1_700_000_000_000 + offset,
    )  # fmt: skip


def test_dead_letters_are_grouped_by_origin_and_error_class() -> None:
    letters = [
        read(letter(0, "orders", 0, "ValueError")),
        read(letter(1, "orders", 1, "ValueError")),
        read(letter(2, "orders", 0, "ValueError", "last one")),
        read(letter(3, "orders", 0, "KeyError")),
        read(FakeRaw(4, topic="orders_dlq", headers=None)),  # put there by hand
    ]
    groups = group_dead_letters(letters)
    assert [(g.original_topic, g.original_partition, g.error_class, g.count) for g in groups] == [
        ("orders", 0, "ValueError", 2),
        ("", None, "(none)", 1),
        ("orders", 0, "KeyError", 1),
        ("orders", 1, "ValueError", 1),
    ]
    first = groups[0].to_dict()
    assert first["refs"] == ["0:0", "0:2"]
    assert first["sample"] == "last one"
    assert first["newest"] == 1_700_000_000.002
    assert letters[0].attempts == 3
    assert letters[0].original_offset == 40


def test_a_payload_that_did_not_fit_its_model_shows_its_field_errors() -> None:
    errors = b'[{"path": "$.id", "message": "Expected `int`, got `str`"}]'
    raw = FakeRaw(
        0, topic="orders_dlq", value=b"{}",
        headers=[("original_error_class", b"MessageValidationError"),
                 ("original_validation_errors", errors)],
    )  # fmt: skip
    assert read(raw).validation_errors == (
        {"path": "$.id", "message": "Expected `int`, got `str`"},
    )
    garbled = FakeRaw(1, topic="orders_dlq", headers=[("original_validation_errors", b"[{")])
    assert read(garbled).validation_errors == (), "a header not as written reads as none"
    assert read(letter(2, "orders", 0, "ValueError")).validation_errors == ()
