"""The action pages render every shape of result they can be given (the templates are strict:
a missing key would be a 500): commands done, refused and timed out, with and without
threads; redrives running, done with offsets not found, failed; DLQ lists and pages."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from conveyor.cli.main import cli
from conveyor.web.access import verify_password
from conveyor.web.ui.explorer_views import Redrive
from conveyor.web.ui.rendering import environment as _environment

PAGE: dict[str, Any] = {
    "base": "", "title": "t", "client_id": "shop", "active": "", "csrf_field": "csrf_token",
    "csrf_token": "tok", "user": None, "login": False, "read_only": False, "request": None,
    "can": lambda *a: True,
}  # fmt: skip


def render(template: str, **data: Any) -> str:
    return _environment().get_template(template).render(**PAGE, **data)


@pytest.mark.parametrize(
    "result",
    [
        {"status": "done", "reason": "", "result": {"state": "quiet"}},
        {"status": "done", "reason": "", "result": {"threads": [{"name": "MainThread", "daemon": False, "stack": "  File x"}]}},
        {"status": "refused", "reason": "orders/7 is not assigned to this process", "result": {}},
        {"status": "timed out", "reason": "no answer from process p within 2 s", "result": {}, "process": None},
        {"status": "done", "reason": "", "result": {"topic": "o", "partition": 0, "until": None}},
    ],
)  # fmt: skip
def test_a_command_result_of_any_shape_renders(result: dict[str, Any]) -> None:
    page = render(
        "command_result.html", result={"id": "1", "command": "c", "process": "p", **result}
    )
    assert result["status"] in page
    assert result["reason"] in page


def test_a_fleet_result_lists_each_process_with_its_answer() -> None:
    def one(
        process: str, status: str, reason: str = "", state: str | None = None
    ) -> dict[str, Any]:
        return {"id": "1", "command": "quiet", "process": process, "status": status,
                "reason": reason, "result": {"state": state} if state else {}}  # fmt: skip

    result = {"id": "1", "command": "quiet", "process": "*", "group": "orders",
              "scope": "every process of consumer group orders", "status": "timed out",
              "results": [one("a:1:x", "done", state="quiet"),
                          one("b:2:y", "timed out", "no answer within 10 s from this process")]}  # fmt: skip
    page = render("fleet_result.html", result=result)
    assert "every process of consumer group orders" in page
    assert "1 of 2 done" in page
    assert 'data-process="a:1:x" data-status="done"' in page
    assert 'data-process="b:2:y" data-status="timed out"' in page
    assert "no answer within 10 s" in page
    nobody = render(
        "fleet_result.html",
        result={**result, "group": None, "scope": "every process", "results": []},
    )
    assert "no process answered" in nobody


def test_a_redrive_renders_while_running_done_and_failed() -> None:
    running = Redrive("1", "orders_dlq", "2 selected", None)
    assert 'data-refresh="1"' in render("redrive.html", redrive=running.to_dict())
    done = Redrive("2", "orders_dlq", "3 selected", "orders", total=3, done=3, state="done",
                   counts={"orders": 2}, missing=[(0, 9)])  # fmt: skip
    page = render("redrive.html", redrive=done.to_dict())
    assert "data-refresh" not in page
    assert "0:9" in page
    failed = Redrive("3", "orders_dlq", "all", None, state="failed", error="KafkaError: gone")
    assert "KafkaError: gone" in render("redrive.html", redrive=failed.to_dict())


def test_dlq_pages_render_with_and_without_actions() -> None:
    dlqs = [{"name": "orders_dlq", "sources": ["orders"], "by": "routes", "exists": True, "messages": 3, "unread": None},
            {"name": "later_dlq", "sources": ["x"], "by": "routes", "exists": False, "messages": None, "unread": None}]  # fmt: skip
    assert "not created yet" in render("dlqs.html", dlqs=dlqs)
    page: dict[str, Any] = {
        "topic": "orders_dlq", "entry": dlqs[0], "total": 1, "shown": 1, "complete": True,
        "discardable": False, "discarded": 0, "queue": None,
        "groups": [{"original_topic": "orders", "original_partition": 0, "error_class": "ValueError",
                    "count": 1, "newest": None, "sample": "<b>boom</b>", "refs": ["0:0"]}],
        "letters": [{"ref": "0:0", "partition": 0, "offset": 0, "timestamp": None, "original_topic": "",
                     "original_partition": None, "original_offset": None, "error_class": "(none)",
                     "error_message": "", "attempts": None, "key": None, "validation_errors": [], "job": None}],
    }  # fmt: skip
    with_actions = render("dlq.html", **page)
    assert "redrive-selected" in with_actions
    assert "<b>boom</b>" not in with_actions
    without = (
        _environment().get_template("dlq.html").render(**{**PAGE, "can": lambda *a: False}, **page)
    )
    for action in ("redrive-selected", "redrive-all", "redrive-group", 'name="refs"'):
        assert action not in without
    invalid = {**page["letters"][0], "error_class": "MessageValidationError",
               "validation_errors": [{"path": "$.lines[0].qty", "message": "Expected <int>"}]}  # fmt: skip
    assert "discard-selected" not in with_actions, "only dead jobs are discarded"
    jobs_page = render("dlq.html", **{**page, "discardable": True, "discarded": 2})
    assert "discard-selected" in jobs_page
    assert "2 discarded, not listed" in jobs_page
    shown = render("dlq.html", **{**page, "letters": [invalid]})
    assert "<li><code>$.lines[0].qty</code> Expected &lt;int&gt;</li>" in shown
    assert "<code>original_*</code> headers dropped" in with_actions
    assert 'placeholder="the original topic"' in with_actions


def test_a_dead_job_page_says_its_queue_and_the_job_headers_it_drops() -> None:
    """A dead job goes back to its job queue topic, without its ``conveyor-job-*`` attempt and
    error headers: the hint, the groups and the redrive form say so, not ``original_*``."""
    page = render(
        "dlq.html", topic="emails_dead", entry={"name": "emails_dead", "sources": ["emails"]},
        total=1, shown=1, complete=True, discardable=True, discarded=0, queue="emails",
        groups=[{"original_topic": "", "original_partition": None, "error_class": "SMTPError",
                 "count": 1, "newest": None, "sample": "down", "refs": ["0:4"]}],
        letters=[],
    )  # fmt: skip
    assert "to its job queue topic <code>emails</code>" in page
    assert "<code>conveyor-job-*</code> attempt and error headers dropped" in page
    assert "original_*" not in page
    assert "<th>job queue</th>" in page
    assert "<td>emails</td>" in page
    assert "original topic" not in page
    assert 'placeholder="the job queue topic"' in page


def test_the_job_queues_hint_says_what_failed_counts() -> None:
    queue = {"queue": "emails", "topic": "emails", "dead_topic": "emails_dead", "jobs": ["send"],
             "waiting": 0, "running": 0, "done": 5, "done_per_second": 0.0, "retried": 2,
             "died": 1, "failed": 3, "dead": 1}  # fmt: skip
    page = render("background_jobs.html", queues=[queue])
    assert "failed is retried + died" in page
    assert 'id="job-queues"' in page


def test_an_app_without_background_jobs_says_how_to_make_one() -> None:
    page = render("background_jobs.html", queues=[])
    assert "This app has no background job" in page
    assert "job-queues" not in page


def test_a_sensitive_config_is_masked_on_the_topic_page() -> None:
    page = render(
        "topic.html", name="t", skew=0.0, bars=[], partitions=[],
        configs=[{"name": "sasl.jaas.config", "value": "password=hunter2", "source": "DYNAMIC_TOPIC_CONFIG",
                  "default": False, "sensitive": True, "read_only": False},
                 {"name": "retention.ms", "value": "604800000", "source": "DEFAULT_CONFIG",
                  "default": True, "sensitive": False, "read_only": False}],
    )  # fmt: skip
    assert "hunter2" not in page
    assert "(masked)" in page
    assert "604800000" in page


def test_hash_password_prints_a_hash_of_the_password_and_never_the_password() -> None:
    result = CliRunner().invoke(cli, ["web", "hash-password"], input="pa55word\npa55word\n")
    assert result.exit_code == 0, result.output
    printed = result.output.strip().splitlines()[-1]
    assert "pa55word" not in printed
    assert verify_password("pa55word", printed)
