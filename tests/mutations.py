"""Switch features off one at a time and check that the tests claiming them turn red.

Each mutation below is a textual patch of one feature in a scratch copy of ``src/`` (the
working tree is never touched); the tests that guard the feature run against that copy
(``PYTHONPATH`` puts it before the editable install) and must fail. The result is a table:
``killed`` (the tests failed, as they should), ``survived`` (they passed: a test to fix) or
``stale`` (the patch no longer applies, or leaves code that does not compile: update it
here).

Not part of ``make test`` (it runs each guarding test again per mutation, a few minutes in
all). Run it with a broker up::

    .venv/bin/conveyor broker start
    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 .venv/bin/python tests/mutations.py [--jobs 3] [NAME ...]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    """``old`` replaced by ``new`` in ``path`` (each ``old`` must occur exactly once)."""

    name: str
    path: str
    patches: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]


STRATEGIES = "conveyor/processing/strategies.py"
DLQ_TESTS = "tests/integration/errors/test_dead_letter_queue.py::test_dispatch_variants"
BAD_RECORDS = (
    "tests/integration/connect/test_bad_records.py::"
    "test_a_record_the_sink_cannot_encode_goes_to_the_dead_letter_queue_with_the_reason"
)

MUTATIONS = (
    Mutation(
        "ticks: a partition that never had a message in this process does not tick",
        "conveyor/processing/listener.py",
        (
            (
                "return self._executor(*key) if ticks(self.route_of(key[0])) else None",
                "return self.executors.get(key) if ticks(self.route_of(key[0])) else None",
            ),
        ),
        (
            "tests/integration/processing/test_consuming.py::"
            "test_an_idle_partition_ticks_while_its_sibling_is_busy",
        ),
    ),
    Mutation(
        "transactional DLQ dispatch replaced by the plain path",
        STRATEGIES,
        (("if dlq is not None and dlq.transactional:", "if False:"),),
        (DLQ_TESTS,),
    ),
    Mutation(
        "sync DLQ dispatch and sync marking forced to async",
        STRATEGIES,
        (
            ('if dlq is None or dlq.dispatch_method == "produce_sync":', "if dlq is None:"),
            (
                'sync_mark = dlq is not None and dlq.marking_method == "mark_as_consumed_sync"',
                "sync_mark = False",
            ),
        ),
        (DLQ_TESTS,),
    ),
    Mutation(
        "every DLQ made independent",
        STRATEGIES,
        (("if dlq is not None and dlq.independent and progressed:", "if progressed:"),),
        (DLQ_TESTS,),
    ),
    Mutation(
        "variant settings dropped",
        "conveyor/producer/producer.py",
        (("config = {**self.settings.kafka, **overrides}", "config = dict(self.settings.kafka)"),),
        ("tests/integration/producer/test_recovery.py::test_a_variant_sends_with_its_own_acks",),
    ),
    Mutation(
        "the server ignoring reply_partition",
        "conveyor/rpc/handlers.py",
        (('partition = request.get("reply_partition")', "partition = None"),),
        ("tests/integration/rpc/test_rpc.py::test_every_reply_goes_to_the_requested_partition",),
    ),
    Mutation(
        "the exponential back-off replaced by a constant delay",
        STRATEGIES,
        (("if not self.exponential:", "if True:"),),
        (
            "tests/unit/processing/test_executor.py",
            "tests/unit/processing/test_strategies.py",
            "tests/integration/processing/test_consuming.py::test_a_failing_batch_waits_longer_each_time_it_fails",
        ),
    ),
    Mutation(
        "the iterator joining a group iter-... with auto-commit on",
        "conveyor/iterator/iterator.py",
        (
            (
                'reader_settings(kafka, f"conveyor-iterator-{uuid.uuid4().hex}"),',
                '{**reader_settings(kafka, f"iter-{uuid.uuid4().hex}"), "enable.auto.commit": True, "enable.auto.offset.store": True},',
            ),
        ),
        (
            "tests/integration/iterator/test_iterator.py::test_stop_from_another_thread_and_no_group",
        ),
    ),
    Mutation(
        "the worker pool cut to 1 thread",
        "conveyor/processing/workers.py",
        (("for index in range(size)\n        ]", "for index in range(1)\n        ]"),),
        (
            "tests/integration/processing/test_consuming.py::test_partitions_run_in_parallel_on_the_worker_pool",
        ),
    ),
    Mutation(
        "long_running_job ignored",
        "conveyor/processing/executor.py",
        (("long_running = self.route.long_running_job", "long_running = False"),),
        (
            "tests/integration/processing/test_consuming.py::test_a_long_running_job_fetches_nothing_behind_it_and_keeps_the_group",
        ),
    ),
    Mutation(
        "a dead letter's offset committed before its copy is acknowledged",
        STRATEGIES,
        (
            (
                "handle = partition.send_held(offset, copy, producer)",
                "handle = producer.produce_async(**copy)",
            ),
        ),
        (
            "tests/integration/processing/test_server.py::test_a_kill_before_the_dlq_acknowledged_the_copy_loses_nothing",
            "tests/unit/processing/test_strategies.py",
        ),
    ),
    Mutation(
        "at-least-once piping not holding its offset",
        "conveyor/consumer.py",
        (("if at_least_once:", "if False:"),),
        (
            "tests/integration/errors/test_piping.py::test_at_least_once_piping_commits_only_what_was_acknowledged",
        ),
    ),
    Mutation(
        "quiet taking new batches",
        "conveyor/processing/listener.py",
        (
            ("self.quieted = True\n        if self.state", "if self.state"),
            ("executor.hold()", "pass"),
        ),
        (
            "tests/integration/processing/test_consuming.py::test_quiet_finishes_running_batches_and_takes_no_new_ones",
        ),
    ),
    Mutation(
        "web: consumer errors not published to the errors topic",
        "conveyor/web/process/tracking.py",
        (
            (
                "    def _publish(self, record: dict[str, Any]) -> None:\n        try:",
                "    def _publish(self, record: dict[str, Any]) -> None:\n        return\n        try:",
            ),
        ),
        (
            "tests/integration/web/test_reporting.py::test_an_exception_in_a_consumer_shows_on_the_errors_page_with_its_traceback",
        ),
    ),
    Mutation(
        "web: an error before the tracker's first look at the topics dropped",
        "conveyor/web/process/tracking.py",
        (
            (
                "                    self._early.append(error_record(event, self.id, self.app.settings.client_id))",
                "                    pass",
            ),
        ),
        ("tests/unit/web/process/test_tracking.py",),
    ),
    Mutation(
        "producer: a closed client keeps librdkafka's producer (until a full collection)",
        "conveyor/driver/producers.py",
        (
            (
                "        if self.poller.stop():\n            self._release()\n",
                "        self.poller.stop()\n",
            ),
        ),
        ("tests/unit/driver/test_producers.py",),
    ),
    Mutation(
        "web: lag left out of the metric series",
        "conveyor/web/aggregation/fold.py",
        (("            lag[topic] = lag.get(topic, 0) + value", "            pass"),),
        (
            "tests/integration/web/test_reporting.py::test_lag_appears_on_a_topic_and_falls_as_the_consumer_catches_up",
        ),
    ),
    Mutation(
        "web: a silent process never shown as dead",
        "conveyor/web/aggregation/fold.py",
        (('        return "dead"\n', "        return reported\n"),),
        (
            "tests/integration/web/test_reporting.py::test_a_process_appears_and_shows_as_dead_after_it_is_killed",
        ),
    ),
    Mutation(
        "tracing: send spans end when produce() returns, not on the delivery report",
        "conveyor/tracing/tracer.py",
        (
            (
                "        return carrier, delivered\n",
                "        delivered(None, type('M', (), {'partition': lambda s: -1, 'offset': lambda s: -1})())\n        return carrier, None\n",
            ),
        ),
        (
            "tests/integration/tracing/test_tracing.py::test_a_send_span_ends_on_the_delivery_report_with_error_type",
        ),
    ),
    Mutation(
        "tracing: the dead letter sent outside the failed process span",
        "conveyor/processing/hook_runs.py",
        (
            (
                "        span.failed(error)\n        try:",
                "        span.failed(error)\n        self._end_span(span, None)\n        try:",
            ),
            (
                "        finally:\n            self._end_span(span, None)\n\n    def _interrupted",
                "        finally:\n            pass\n\n    def _interrupted",
            ),
        ),
        (
            "tests/integration/tracing/test_tracing.py::test_one_trace_spans_produce_consume_pipe_consume_and_dead_letter",
        ),
    ),
    Mutation(
        "tracing: a batch linked to its first message only",
        "conveyor/tracing/tracer.py",
        (("        for raw in batch[: self.max_links]:", "        for raw in batch[:1]:"),),
        (
            "tests/integration/tracing/test_tracing.py::test_process_spans_link_to_every_message_of_their_batch",
        ),
    ),
    Mutation(
        "tracing: the RPC handler's reply outside its request's trace",
        "conveyor/rpc/client.py",
        (
            (
                "            span, token = tracing.start_call(call.name, self.commands_topic)",
                "            span, token = tracing.start_call(call.name, self.commands_topic)\n            tracing.detach(token)\n            token = None",
            ),
        ),
        ("tests/integration/tracing/test_tracing.py::test_an_rpc_call_is_one_trace",),
    ),
    Mutation(
        "metrics: consumed messages not counted",
        "conveyor/metrics/prometheus.py",
        (('        self.consumed.labels("kafka", topic, group).inc(count)', "        pass"),),
        (
            "tests/integration/metrics/test_metrics.py::test_a_scrape_shows_the_lag_of_a_group_behind_and_counters_moving",
        ),
    ),
    Mutation(
        "metrics: the running batch left out of the lag in seconds",
        "conveyor/processing/executor.py",
        (("        if running is not None:\n            return running.first\n", ""),),
        (
            "tests/unit/processing/test_executor.py::TestBatches::test_the_running_batch_counts_as_waiting_for_the_lag_in_seconds",
        ),
    ),
    Mutation(
        "metrics: lag left out of the scrape",
        "conveyor/metrics/prometheus.py",
        (("                lag.add_metric(labels, part.lag)", "                pass"),),
        (
            "tests/integration/metrics/test_metrics.py::test_a_scrape_shows_the_lag_of_a_group_behind_and_counters_moving",
        ),
    ),
    Mutation(
        "tracing: a failing send hook stops the message",
        "conveyor/producer/send_path.py",
        (
            (
                "            except Exception as error:  # a hook (tracing, stamps) never stops a message",
                "            except ZeroDivisionError as error:",
            ),
        ),
        (
            "tests/integration/tracing/test_tracing.py::test_a_failing_send_hook_or_tracer_never_stops_a_message",
        ),
    ),
    Mutation(
        "tracing: a failing tracer stops consuming",
        "conveyor/processing/hook_runs.py",
        (
            (
                "        except Exception as error:\n            _tracing_failed.log(",
                "        except ZeroDivisionError as error:\n            _tracing_failed.log(",
            ),
        ),
        (
            "tests/integration/tracing/test_tracing.py::test_a_failing_send_hook_or_tracer_never_stops_a_message",
        ),
    ),
    Mutation(
        "virtual partitions: the commit is the highest finished offset (skips a slow lane's messages)",
        "conveyor/processing/virtual/tracker.py",
        (
            (
                "        if order[0] != offset:\n            self._finished.add(offset)\n            return",
                "        while order and order[0] <= offset:\n            self._raws.pop(order.popleft(), None)\n        return",
            ),
        ),
        (
            "tests/unit/processing/virtual/test_tracker.py",
            "tests/unit/processing/virtual/test_virtual_executor.py::test_the_marked_offset_never_passes_an_unfinished_lane",
            "tests/integration/processing/test_virtual_partitions.py::test_a_killed_server_skips_nothing_and_never_committed_past_an_unfinished_message",
            "tests/integration/connect/test_postgres.py::test_a_killed_connector_stores_everything_once_and_never_committed_ahead",
        ),
    ),
    Mutation(
        "virtual partitions: lanes ignore the key",
        "conveyor/processing/virtual/lanes.py",
        (
            (
                "        return lane % self.lanes",
                "        return (lane + raw.offset()) % self.lanes",
            ),
        ),
        (
            "tests/unit/processing/virtual/test_virtual_executor.py::test_lanes_keep_order_per_key_and_run_everything_once",
            "tests/integration/processing/test_virtual_partitions.py::test_sixteen_lanes_keep_every_keys_order_and_lose_nothing",
            "tests/integration/connect/test_sinks.py::test_json_lines_with_64_lanes_keep_every_keys_order",
        ),
    ),
    Mutation(
        "virtual partitions: no collapse after a failure (retried in the lanes)",
        "conveyor/processing/virtual/executor.py",
        (
            (
                "        self.lanes[0].queue.extend(redo)\n",
                "        for raw in redo:\n            self.lanes[self.assigner.lane_of(raw)].queue.append(raw)\n        self.collapse.until = None\n",
            ),
        ),
        (
            "tests/unit/processing/virtual/test_virtual_executor.py::test_a_failing_lane_collapses_the_partition_until_past_the_failure",
            "tests/integration/processing/test_virtual_partitions.py::test_a_failure_retries_collapses_and_goes_on_in_order",
        ),
    ),
    Mutation(
        "virtual partitions: a revoked partition's successor starts before its lanes end",
        "conveyor/processing/virtual/executor.py",
        (
            (
                "        if self.active_lanes:\n            return []\n        starts = self._hand_out()",
                "        if self.active_lanes:\n            if self.successor is not None:\n                self.successor._release()\n            return []\n        starts = self._hand_out()",
            ),
        ),
        (
            "tests/unit/processing/virtual/test_virtual_executor.py::test_a_revoked_partition_releases_its_successor_only_after_every_lane",
            "tests/integration/processing/test_virtual_partitions.py::test_a_partition_assigned_straight_back_waits_for_every_old_lane",
        ),
    ),
    Mutation(
        "virtual partitions: async lanes run as worker jobs, not on the event loop",
        "conveyor/processing/virtual/executor.py",
        (("        if self.asynchronous:\n", "        if False:\n"),),
        (
            "tests/integration/processing/test_virtual_partitions.py::test_async_lanes_run_concurrently_on_the_event_loop",
        ),
    ),
    Mutation(
        "sinks: a rejected record is skipped instead of dead-lettered",
        "conveyor/connect/consumer.py",
        (
            (
                "            consumer.dispatch_to_dlq(records[index], SinkRejected(result.reason))",
                "            consumer.mark_as_consumed(records[index])",
            ),
        ),
        (
            "tests/unit/connect/test_sink_routes.py::test_a_rejected_record_goes_to_the_dead_letter_queue_with_the_reason",
            "tests/integration/connect/test_sinks.py::test_a_webhook_gets_every_record_in_order_retries_5xx_and_dead_letters_4xx",
        ),
    ),
    Mutation(
        "a route's own kafka settings left out of its listener",
        "conveyor/processing/listener_reports.py",
        (("        **routes[0].kafka,", ""),),
        ("tests/integration/processing/test_route_kafka.py",),
    ),
    Mutation(
        "routes with their own kafka settings share the group's listener",
        "conveyor/processing/runner.py",
        (("own = tuple(sorted(route.kafka.items()))", "own = ()"),),
        ("tests/integration/processing/test_route_kafka.py",),
    ),
    Mutation(
        "filters: a held partition wakes at once and checks again",
        "conveyor/processing/executor.py",
        (("call_later(seconds, self._end_hold)", "call_later(0.0, self._end_hold)"),),
        (
            "tests/integration/processing/test_filters.py::test_a_throttle_holds_the_rate_and_idles_between_intervals",
        ),
    ),
    Mutation(
        "filters: delay hands every message on",
        "conveyor/processing/filters.py",
        (("if age is not None and age < self.delay_by:", "if age is not None and age < 0:"),),
        (
            "tests/integration/processing/test_filters.py::test_a_delay_never_hands_a_message_over_early",
        ),
    ),
    Mutation(
        "scheduled messages: a cancellation is ignored",
        "conveyor/schedules/dispatcher.py",
        (
            (
                "                    pending.pop(schedule_id, None)\n                    continue",
                "                    continue",
            ),
        ),
        (
            "tests/integration/processing/test_scheduled_messages.py::test_scheduled_messages_arrive_on_time_and_cancelled_ones_never",
        ),
    ),
    Mutation(
        "scheduled messages: the offset is committed past schedules still pending",
        "conveyor/schedules/dispatcher.py",
        (
            (
                "target = min((e.offset for e in pending.values()), default=last + 1)",
                "target = last + 1",
            ),
        ),
        (
            "tests/integration/processing/test_scheduled_messages.py::test_a_schedule_outlives_the_process_that_loaded_it",
            "tests/integration/schedules/test_schedules_sigkill.py",
        ),
    ),
    Mutation(
        "recurring tasks: every process runs them, not only the owner of the partition",
        "conveyor/schedules/recurring.py",
        (
            (
                "            if not self._leading:\n                self._changed.wait(",
                "            if False:\n                self._changed.wait(",
            ),
        ),
        ("tests/integration/processing/test_recurring.py",),
    ),
    Mutation(
        "schedules page: Cancel writes the tombstone of another id",
        "conveyor/web/ui/schedule_views.py",
        (
            (
                "**cancel_message(schedule_id, self.topic)",
                "**cancel_message(schedule_id + '-', self.topic)",
            ),
        ),
        (
            "tests/integration/schedules/test_schedules_web.py::test_the_page_lists_pending_schedules_and_cancel_really_cancels",
        ),
    ),
    Mutation(
        "recurring tasks: a disabled task still runs its slots",
        "conveyor/schedules/recurring.py",
        (
            (
                "if task.next_at > self.last_runs.get(task.name, 0.0) and not disabled:",
                "if task.next_at > self.last_runs.get(task.name, 0.0):",
            ),
        ),
        (
            "tests/unit/schedules/test_records.py",
            "tests/integration/schedules/test_schedules_web.py::test_recurring_tasks_run_now_disable_and_enable_from_the_page",
        ),
    ),
    Mutation(
        "rpc: no reply cache (a retried request runs its handler again)",
        "conveyor/rpc/handlers.py",
        (("        cached = self.rpc.replies.get(cache_key)", "        cached = None"),),
        ("tests/integration/rpc/test_rpc_production.py",),
    ),
    Mutation(
        "rpc: arguments not checked against the handler's type hints",
        "conveyor/rpc/handlers.py",
        (
            (
                "            if checker is not None:\n                args, kwargs = checker.check(args, kwargs)",
                "            pass",
            ),
        ),
        (
            "tests/integration/rpc/test_rpc_production.py::test_arguments_authorization_retries_and_events",
        ),
    ),
    Mutation(
        "rpc: a call_async left unread once the callers that read end together",
        "conveyor/rpc/client.py",
        (
            (
                "                if not self._reading and len(self._pending) > self._callers:\n                    self._unattended_calls.notify()",
                "                pass",
            ),
        ),
        ("tests/unit/rpc/test_client_reading.py",),
    ),
    Mutation(
        "polling: a message that came after a wait waits for a drain",
        "conveyor/driver/consumers.py",
        (("if not batch or clock() - began > _WAITED:", "if not batch:"),),
        ("tests/unit/driver/test_consumers.py",),
    ),
    Mutation(
        "logging: a level set after the app was built is not seen at start",
        "conveyor/app.py",
        (("            self._logging.refresh()", "            pass"),),
        (
            "tests/integration/processing/test_consuming.py::test_batch_lines_are_logged_when_debug_was_set_up_after_the_app_was_built",
        ),
    ),
    Mutation(
        "routing patterns: a topic is found by its name only",
        "conveyor/processing/listener.py",
        (("if route is not None or not self._patterns:", "if True:"),),
        ("tests/integration/processing/test_patterns.py",),
    ),
    Mutation(
        "transaction: marked offsets committed at once, outside the transaction",
        "conveyor/consumer.py",
        (
            (
                "        if scope is not None:\n            return scope.mark(message.offset + 1, metadata)\n        return self._executor.mark(message.offset + 1, False, metadata)",
                "        if scope is not None:\n            self._executor.mark(message.offset + 1, True, metadata)\n            return scope.mark(message.offset + 1, metadata)\n        return self._executor.mark(message.offset + 1, False, metadata)",
            ),
        ),
        (
            "tests/integration/processing/test_exactly_once.py::test_outputs_are_exactly_once_under_repeated_sigkill",
        ),
    ),
    Mutation(
        "transaction: outputs sent by the plain producer",
        "conveyor/consumer.py",
        (
            (
                "        if self._transaction is not None:\n            return self._executor.transactional_producer()\n",
                "",
            ),
        ),
        ("tests/integration/processing/test_exactly_once.py",),
    ),
    Mutation(
        "swarm: a node's exit read as a stop signal",
        "conveyor/swarm/supervisor.py",
        (("        if signum != signal.SIGCHLD:", "        if True:"),),
        ("tests/unit/swarm/test_supervisor.py",),
    ),
    Mutation(
        "swarm: a dead node is not replaced",
        "conveyor/swarm/supervisor.py",
        (("        self._start(node.index)\n", ""),),
        ("tests/unit/swarm/test_supervisor.py", "tests/integration/swarm/test_swarm.py"),
    ),
    Mutation(
        "swarm: no heartbeat from the nodes",
        "conveyor/swarm/heartbeat.py",
        (('                os.write(fd, b".")\n', "                pass\n"),),
        ("tests/integration/swarm/test_swarm.py",),
    ),
    Mutation(
        "rpc: cached replies kept in orjson's oversized buffers",
        "conveyor/rpc/handlers.py",
        (
            (
                "        payload = bytes(memoryview(payload))  # right-sized (see the class)\n",
                "",
            ),
        ),
        ("tests/unit/rpc/test_reply_cache.py",),
    ),
    Mutation(
        "webhook: a batch's keys POSTed one after another",
        "conveyor/connect/sinks/http.py",
        (('        if len(records) > 1 and ordering != "partition":\n', "        if False:\n"),),
        ("tests/unit/connect/test_webhook_keys.py",),
    ),
    Mutation(
        "webhook: a key goes on after its record failed",
        "conveyor/connect/sinks/side_by_side.py",
        (
            (
                "        self._results[index] = result\n        self._queues[queue].clear()\n",
                "        self._results[index] = result\n",
            ),
        ),
        (
            "tests/unit/connect/test_webhook_keys.py",
            "tests/integration/connect/test_sinks.py::test_a_webhook_gets_every_record_in_order_retries_5xx_and_dead_letters_4xx",
        ),
    ),
    Mutation(
        "webhook: what was POSTed beyond a failure is POSTed again",
        "conveyor/connect/sinks/http.py",
        (("        self._ahead.remember(\n", "        (lambda *_: None)(\n"),),
        (
            "tests/unit/connect/test_webhook_keys.py",
            "tests/integration/connect/test_sinks.py::test_a_webhook_gets_every_record_in_order_retries_5xx_and_dead_letters_4xx",
        ),
    ),
    Mutation(
        "webhook: a remembered 4xx answered as delivered",
        "conveyor/connect/sinks/side_by_side.py",
        (
            (
                "                self._answers[(record.topic, record.partition, record.offset)] = answer\n",
                "                self._answers[(record.topic, record.partition, record.offset)] = None\n",
            ),
        ),
        ("tests/unit/connect/test_webhook_keys.py",),
    ),
    Mutation(
        "webhook: a request that timed out keeps its connection slot",
        "conveyor/connect/sinks/side_by_side.py",
        (
            (
                "            request.connection.close()  # an answer may still come: never reuse it\n            self._pool.give_back(request.connection)\n",
                "            request.connection.close()  # an answer may still come: never reuse it\n",
            ),
        ),
        ("tests/unit/connect/test_webhook_keys.py",),
    ),
    Mutation(
        "webhook: an unreachable endpoint tried once per key",
        "conveyor/connect/sinks/side_by_side.py",
        (
            (
                "            self._unreachable = True\n            return\n        except BaseException:\n            self._pool.give_back(connection)\n            raise\n        self._wait_for(",
                "            return\n        except BaseException:\n            self._pool.give_back(connection)\n            raise\n        self._wait_for(",
            ),
        ),
        ("tests/unit/connect/test_webhook_keys.py",),
    ),
    Mutation(
        "webhook: a kept-alive connection closed before its answer counts as a failure",
        "conveyor/connect/sinks/side_by_side.py",
        (
            (
                "            status, answer = connection.receive(request.reused)\n        except StaleConnection:\n",
                "            status, answer = connection.receive(request.reused)\n        except ZeroDivisionError:\n",
            ),
        ),
        ("tests/unit/connect/test_webhook_keys.py",),
    ),
    Mutation(
        "webhook: a key's next record sent while its resent one is in flight",
        "conveyor/connect/sinks/side_by_side.py",
        (
            (
                "                    if self._answer(request) and self._queues[request.queue]:\n",
                "                    if (self._answer(request) or True) and self._queues[request.queue]:\n",
            ),
        ),
        ("tests/unit/connect/test_webhook_keys.py",),
    ),
    Mutation(
        "webhook: without a DLQ a 4xx does not stop its key",
        "conveyor/connect/sinks/http.py",
        (
            (
                "        return isinstance(result, Reject) and not self._dead_letters\n",
                "        return False\n",
            ),
        ),
        ("tests/unit/connect/test_webhook_keys.py",),
    ),
    Mutation(
        "sink routes: the sink is not told about its route",
        "conveyor/connect/routing.py",
        (
            (
                "            use_route(topic, ordering, dead_letter_queue is not None)\n",
                "            pass\n",
            ),
        ),
        ("tests/unit/connect/test_sink_routes.py",),
    ),
    Mutation(
        "json lines: a batch is not fsync'd before deliver returns",
        "conveyor/connect/sinks/files.py",
        (("                os.fsync(file.fileno())\n", ""),),
        ("tests/unit/connect/test_json_lines.py",),
    ),
    Mutation(
        "json lines: no rotation by age",
        "conveyor/connect/sinks/files.py",
        (
            (
                "            or (self.max_age is not None and now - self._opened_at >= self.max_age)\n",
                "            or False\n",
            ),
        ),
        ("tests/unit/connect/test_json_lines.py",),
    ),
    Mutation(
        "broadcast: a record it cannot encode is dropped silently",
        "conveyor/connect/sinks/broadcast.py",
        (
            (
                'results.append(Reject(f"cannot encode offset {record.offset}: {error!r}"))',
                "results.append(None)",
            ),
        ),
        (BAD_RECORDS + "[broadcast]",),
    ),
    Mutation(
        "postgres: a record it cannot encode is dropped silently",
        "conveyor/connect/sinks/postgres.py",
        (
            (
                'results.append(Reject(f"cannot encode offset {record.offset}: {error!r}"))',
                "results.append(None)",
            ),
        ),
        (BAD_RECORDS + "[postgres]",),
    ),
    Mutation(
        "webhook: a record it cannot encode is retried, not rejected",
        "conveyor/connect/sinks/http.py",
        (
            (
                'bodies.append(Reject(f"cannot encode offset {record.offset}: {error!r}"))',
                'bodies.append(Retry(f"cannot encode offset {record.offset}: {error!r}"))',
            ),
        ),
        (BAD_RECORDS + "[webhook]",),
    ),
    Mutation(
        "json lines: a record it cannot encode is dropped silently",
        "conveyor/connect/sinks/files.py",
        (
            (
                'results.append(Reject(f"cannot encode offset {record.offset}: {error!r}"))',
                "results.append(None)",
            ),
        ),
        (BAD_RECORDS + "[json_lines]",),
    ),
    Mutation(
        "messages: payloads decoded through a Message per message",
        "conveyor/messages.py",
        (
            (
                "None if (value := raw.value()) is None else decode(value) for raw in self._raws",
                "Message(raw, self._deserializers).payload for raw in self._raws",
            ),
        ),
        ("tests/unit/test_messages.py",),
    ),
    Mutation(
        "adaptive polling: a lone message waits for a full batch",
        "conveyor/driver/consumers.py",
        (("        batch = consume(1, timeout)\n", "        batch = consume(limit, timeout)\n"),),
        (
            "tests/integration/processing/test_consuming.py::test_a_lone_message_goes_on_at_once_while_a_burst_fills_batches",
        ),
    ),
    Mutation(
        "virtual partitions: long_running_job does not pause the partition",
        "conveyor/processing/virtual/executor.py",
        (("if not self.active_lanes and self.route.long_running_job:", "if False:"),),
        (
            "tests/integration/processing/test_consuming.py::test_a_long_running_job_fetches_nothing_behind_it_and_keeps_the_group[virtual partitions]",
        ),
    ),
    Mutation(
        "exactly once: a transaction whose mark was refused commits without its offset",
        "conveyor/consumer.py",
        (
            ("if self._executor.revoked or scope.refused:", "if self._executor.revoked:"),
            (
                "        if scope.next_offset is None:\n            raise",
                "        if False:\n            raise",
            ),
            (
                "        next_offset = self._check_marked(scope)\n        executor.offsets_in_transactions()\n",
                "        next_offset = self._check_marked(scope)\n        if next_offset is None:\n            return\n        executor.offsets_in_transactions()\n",
            ),
        ),
        (
            "tests/unit/testing/test_consumers.py::test_a_transaction_without_its_offset_aborts_and_commits_no_output",
        ),
    ),
    Mutation(
        "start positions: an offset that cannot be read is taken for none (initial offset)",
        "conveyor/processing/positions.py",
        (
            (
                "            except KafkaError as failure:\n",
                "            except KafkaError as failure:\n                committed = {}\n                break\n",
            ),
        ),
        ("tests/unit/processing/test_positions.py",),
    ),
    Mutation(
        "exactly once: a restart fences nothing (at start nor at a stalled offset fetch)",
        "conveyor/producer/transactions.py",
        (
            (
                "        if not self.enabled or not self._lock.acquire(blocking=False):\n            return",
                "        if True:\n            return",
            ),
        ),
        (
            "tests/integration/processing/test_exactly_once.py::test_outputs_are_exactly_once_under_repeated_sigkill",
        ),
    ),
    Mutation(
        "exactly once: a transactional.id per process (pid), not per slot",
        "conveyor/app_producers.py",
        (
            (
                "                instance = host_slot(self._slot_name)",
                "                instance = str(os.getpid())",
            ),
        ),
        (
            "tests/integration/processing/test_exactly_once.py::test_outputs_are_exactly_once_under_repeated_sigkill",
        ),
    ),
    Mutation(
        "listener: no thread takes over while a batch blocks the listener's own",
        "conveyor/processing/listener_thread.py",
        (
            (
                "            self._timers.call_later(TAKE_OVER_AFTER / 2, self._watch)\n\n    def join",
                "            pass\n\n    def join",
            ),
        ),
        ("tests/integration/processing/test_slow_inline_batch.py",),
    ),
    Mutation(
        "produce_sync: the follower waits the caller's whole timeout again",
        "conveyor/producer/produce_calls.py",
        (
            (
                "report = handle.wait(max(0.0, deadline - time.monotonic()))",
                "report = handle.wait(wait)",
            ),
        ),
        ("tests/integration/producer/test_broker_outage.py",),
    ),
    Mutation(
        "web UI: Sign out leaves the session valid",
        "conveyor/web/ui/guard.py",
        (("        self.sessions.revoke(self.session(request))", "        pass"),),
        ("tests/unit/web/test_access.py::test_a_cookie_copied_before_sign_out_no_longer_signs_in",),
    ),
    Mutation(
        "settings: the producer's kafka values go unchecked (None reaches float())",
        "conveyor/producer/settings.py",
        (("    check_kafka_values(kafka)\n", ""),),
        (
            "tests/unit/test_app.py::test_a_kafka_setting_of_the_wrong_type_is_named_for_app_and_producer",
        ),
    ),
    Mutation(
        "producer: the reload budget never refills",
        "conveyor/producer/producer.py",
        (("                self._reloads = 0  # a client that ran", "                pass  #"),),
        (
            "tests/integration/producer/test_recovery.py::test_the_reload_budget_refills_after_a_calm_spell",
        ),
    ),
    Mutation(
        "transactions: the block belongs to the thread, not to the task that opened it",
        "conveyor/producer/transactions.py",
        (
            (
                "        return token is not None and self._inside.get() is token",
                "        return token is not None",
            ),
        ),
        ("tests/unit/producer/test_transactions_async.py",),
    ),
    Mutation(
        "transactions: an async block commits on the loop's thread",
        "conveyor/producer/transactions.py",
        (
            (
                "            finishing = loop.run_in_executor(None, run)\n",
                "            run()\n            return\n",
            ),
        ),
        ("tests/unit/producer/test_transactions_async.py",),
    ),
    Mutation(
        "transactions: `with self.transaction()` allowed in async def consume()",
        "conveyor/consumer.py",
        (
            (
                '        if _on_event_loop():\n            raise ConfigurationError(\n                "`with self.transaction():`',
                '        if False:\n            raise ConfigurationError(\n                "`with self.transaction():`',
            ),
        ),
        (
            "tests/unit/testing/test_consumers.py::test_an_async_consumer_commits_with_async_with_and_is_told_when_it_uses_with",
        ),
    ),
    Mutation(
        "awaits: a report served while the await registers is not looked for again",
        "conveyor/driver/handles.py",
        (
            (
                "            elif self.done():\n                popped = _awaits.pop(self, None)",
                "            elif False:\n                popped = _awaits.pop(self, None)",
            ),
        ),
        ("tests/unit/driver/test_awaitable_handles.py",),
    ),
    Mutation(
        "awaits: a second await of one handle is not registered",
        "conveyor/driver/handles.py",
        (
            (
                "                self.add_done_callback(lambda _handle: settle(future))",
                "                pass",
            ),
        ),
        ("tests/unit/driver/test_awaitable_handles.py",),
    ),
    Mutation(
        "typed routes: a batch is not checked against its models before consume()",
        "conveyor/processing/executor.py",
        (("        if self.route.deserializers.validates:", "        if False:"),),
        (
            "tests/integration/models/test_typed_messages.py::test_an_invalid_payload_goes_to_the_dlq_with_its_errors_and_the_others_in_order[partition]",
        ),
    ),
    Mutation(
        "typed routes: a lane's batch is not checked against its models",
        "conveyor/processing/virtual/executor.py",
        (
            (
                "        checked = check_models(batch, self.route.deserializers)\n        error = checked.error",
                "        checked = check_models(batch[:0], self.route.deserializers)\n        error = checked.error",
            ),
        ),
        (
            "tests/integration/models/test_typed_messages.py::test_an_invalid_payload_goes_to_the_dlq_with_its_errors_and_the_others_in_order[virtual-partitions]",
        ),
    ),
    Mutation(
        "typed routes: an invalid payload is retried before the DLQ",
        "conveyor/processing/strategies.py",
        (
            (
                "if attempt <= dlq.max_retries and self.at_once(error) is None:",
                "if attempt <= dlq.max_retries:",
            ),
        ),
        (
            "tests/integration/models/test_typed_messages.py::test_an_invalid_payload_goes_to_the_dlq_with_its_errors_and_the_others_in_order[partition]",
        ),
    ),
    Mutation(
        "typed routes: the DLQ copy carries no validation errors",
        "conveyor/messages.py",
        (("    if isinstance(error, MessageValidationError):", "    if False:"),),
        (
            "tests/integration/models/test_typed_messages.py::test_an_invalid_payload_goes_to_the_dlq_with_its_errors_and_the_others_in_order[partition]",
        ),
    ),
    Mutation(
        "typed RPC: model arguments reach the handler as dicts",
        "conveyor/models/arguments.py",
        (
            (
                "                args[position] = self._convert(name, convert, args[position])",
                "                pass",
            ),
        ),
        (
            "tests/integration/models/test_typed_messages.py::test_an_rpc_call_with_model_arguments_and_result",
        ),
    ),
    Mutation(
        "typed RPC: the client does not validate the result",
        "conveyor/rpc/client.py",
        (
            (
                "    if call.returns is None:\n        return value, None",
                "    if True:\n        return value, None",
            ),
        ),
        (
            "tests/integration/models/test_typed_messages.py::test_an_rpc_call_with_model_arguments_and_result",
        ),
    ),
    Mutation(
        "model schemas: every model is taken for compatible",
        "conveyor/schemas/models.py",
        (
            (
                "                entry,\n                COMPATIBLE if fits else INCOMPATIBLE,\n",
                "                entry,\n                COMPATIBLE,\n",
            ),
        ),
        ("tests/integration/schemas/test_model_schemas.py",),
    ),
    Mutation(
        "AsyncAPI: nested models keep their own $defs",
        "conveyor/asyncapi/schemas.py",
        (
            (
                '        definitions: dict[str, Any] = schema.pop("$defs", {})',
                "        definitions: dict[str, Any] = {}",
            ),
        ),
        ("tests/unit/asyncapi/test_document.py",),
    ),
    Mutation(
        "jobs: a failed job is retried in place, holding its partition",
        "conveyor/jobs/queues.py",
        (
            (
                "                self._retry(job, envelope.id, message, raw_headers, attempt + 1, error)\n",
                "                raise\n",
            ),
        ),
        (
            "tests/integration/jobs/test_jobs.py::test_a_failing_job_is_retried_later_with_growing_gaps_while_others_run",
        ),
    ),
    Mutation(
        "jobs: a job that keeps failing is retried forever, never dead",
        "conveyor/jobs/queues.py",
        (("            if attempt > job.retries:", "            if False:"),),
        (
            "tests/integration/jobs/test_jobs.py::test_a_job_that_always_fails_ends_dead_with_its_error",
        ),
    ),
    Mutation(
        "jobs: arguments are not checked against the function",
        "conveyor/jobs/queues.py",
        (
            (
                "            args, kwargs = queue.checkers[job.name].check(envelope.args, envelope.kwargs)",
                "            args, kwargs = envelope.args, envelope.kwargs",
            ),
        ),
        (
            "tests/integration/jobs/test_jobs.py::test_a_job_that_always_fails_ends_dead_with_its_error",
        ),
    ),
    Mutation(
        "jobs: the watchdog never interrupts a plain job",
        "conveyor/jobs/watchdog.py",
        (("                if watch.open and not watch.fired:", "                if False:"),),
        ("tests/unit/jobs/test_watchdog.py",),
    ),
    Mutation(
        "loop serving: the loop is woken by its reports but does not serve them",
        "conveyor/driver/loop_serving.py",
        (
            (
                "            os.read(read, 4096)\n        self._serve()",
                "            os.read(read, 4096)",
            ),
        ),
        (
            "tests/integration/producer/test_loop_serving.py::test_an_awaiting_loop_serves_its_own_reports",
        ),
    ),
    Mutation(
        "loop serving: the poller lies in wait in librdkafka while a loop serves",
        "conveyor/driver/poller.py",
        (("            return _LOOP_SLICE, False", "            return 0.0, False"),),
        (
            "tests/integration/producer/test_loop_serving.py::test_reports_slower_than_the_pollers_backstop_are_served_on_the_loop_too",
        ),
    ),
    Mutation(
        "loop serving: the poller leaves what a blocked loop did not serve",
        "conveyor/driver/poller.py",
        (
            (
                "timeout = 0.0 if idle() or self.loop_serves() else _POLL_SLICE",
                "timeout = 0.0 if idle() or self.loop_serves() else _POLL_SLICE\n"
                "                        if self.loop_serves():\n"
                "                            continue",
            ),
        ),
        (
            "tests/integration/producer/test_loop_serving.py::test_a_blocked_serving_loop_does_not_hold_another_threads_report",
        ),
    ),
    Mutation(
        "loop serving: closing the producer leaves the loop's reader and pipe",
        "conveyor/driver/loop_serving.py",
        (
            (
                "        elif _running_loop() is loop:\n            _drop_reader(loop, pipe)",
                "        elif _running_loop() is loop:\n            pass",
            ),
        ),
        (
            "tests/integration/producer/test_loop_serving.py::test_closing_the_producer_lets_the_loops_pipe_go",
        ),
    ),
    Mutation(
        "loop serving: a second loop takes over from the serving one while it runs",
        "conveyor/driver/loop_serving.py",
        (
            (
                "            if current is not None and not current.is_closed():\n                return False",
                "            if False:\n                return False",
            ),
        ),
        (
            "tests/integration/producer/test_loop_serving.py::test_a_second_loop_and_a_thread_get_their_reports_while_one_loop_serves",
        ),
    ),
    Mutation(
        "loop serving: CONVEYOR_LOOP_SERVING=0 is not read",
        "conveyor/driver/loop_serving.py",
        (('    if os.environ.get(SWITCH, "1") == "0":', "    if False:"),),
        (
            "tests/unit/driver/test_loop_serving.py::test_the_switch_keeps_the_poller_and_says_so_once",
        ),
    ),
    Mutation(
        "loop serving: another interpreter than CPython is served",
        "conveyor/driver/loop_serving.py",
        (('    if sys.implementation.name != "cpython":', "    if False:"),),
        (
            "tests/unit/driver/test_loop_serving.py::test_another_interpreter_keeps_the_poller_and_says_so_once",
        ),
    ),
    Mutation(
        "loop serving: a confluent-kafka not on the tested list is served",
        "conveyor/driver/loop_serving.py",
        (("    if version not in TESTED_CONFLUENT_KAFKA:", "    if False:"),),
        (
            "tests/unit/driver/test_loop_serving.py::test_an_untested_confluent_kafka_keeps_the_poller_and_says_so_once",
        ),
    ),
    Mutation(
        "loop serving: a librdkafka not told for certain leaves loop serving available",
        "conveyor/driver/loop_serving.py",
        (("    if _librdkafka() is None:\n        return", "    if False:\n        return"),),
        (
            "tests/unit/driver/test_loop_serving.py::test_a_librdkafka_not_told_for_certain_keeps_the_poller_and_says_so_once",
        ),
    ),
    Mutation(
        "loop serving: the client's callbacks do not prove its layout before librdkafka is called",
        "conveyor/driver/loop_serving.py",
        (
            (
                "    if not rk or not callbacks or not _run_in(callbacks, [id(r) for r in gc.get_referents(client)]):",
                "    if not rk:",
            ),
        ),
        (
            "tests/unit/driver/test_loop_serving.py::test_a_producer_whose_pointer_is_not_proven_is_refused_before_librdkafka_sees_it",
        ),
    ),
    Mutation(
        "loop serving: librdkafka's opaque of the pointer is not compared with the client",
        "conveyor/driver/loop_serving.py",
        (("    if library.opaque(rk) != id(client):", "    if False:"),),
        (
            "tests/unit/driver/test_loop_serving.py::test_a_pointer_librdkafka_does_not_own_is_refused",
        ),
    ),
    Mutation(
        "loop serving: the fallback is told every time, not once per process",
        "conveyor/driver/loop_serving.py",
        (("        if _Told.done:\n            return", "        if False:\n            return"),),
        (
            "tests/unit/driver/test_loop_serving.py::test_the_switch_keeps_the_poller_and_says_so_once",
            "tests/unit/driver/test_loop_serving.py::test_only_the_first_refusal_of_the_process_is_told",
        ),
    ),
    Mutation(
        "tracing: a child of an unsampled trace is built as a span",
        "conveyor/tracing/tracer.py",
        (
            (
                "            if self._drops_unsampled and not parent.trace_flags.sampled:",
                "            if False:",
            ),
        ),
        ("tests/unit/tracing/test_sampling.py",),
    ),
    Mutation(
        "tracing: a dropped root is built as a span (ids of the user's own)",
        "conveyor/tracing/sampling.py",
        (
            (
                "        if trace_id & TRACE_ID_LIMIT < self._bound:",
                "        if True:",
            ),
        ),
        ("tests/unit/tracing/test_sampling.py",),
    ),
    Mutation(
        "tracing: a dropped root is built as a span (ids drawn ahead)",
        "conveyor/tracing/sampling.py",
        (
            (
                "        if isinstance(drawn, str):\n            return drawn\n",
                "        if isinstance(drawn, str):\n            drawn = int(drawn[3:35], 16)\n",
            ),
        ),
        ("tests/unit/tracing/test_sampling.py",),
    ),
    Mutation(
        "tracing: a kept root's trace id is not handed to the SDK (decided twice)",
        "conveyor/tracing/sampling.py",
        (
            (
                "            ids.hand_over(trace_id)\n            return None",
                "            return None",
            ),
            (
                "        self._hand_over(drawn)\n        return None",
                "        return None",
            ),
        ),
        ("tests/unit/tracing/test_sampling.py",),
    ),
    Mutation(
        "offset metadata: the listener's commits leave it out",
        "conveyor/processing/commits.py",
        (
            (
                "                if carried is not None:\n                    metadata[key] = carried",
                "                if False:\n                    metadata[key] = carried",
            ),
        ),
        (
            "tests/integration/processing/test_offset_metadata.py::test_marked_metadata_is_committed_and_read_back_by_the_next_owner",
            "tests/unit/processing/test_offset_metadata.py::test_the_listener_commits_metadata_with_offsets_and_again_when_only_it_changed",
        ),
    ),
    Mutation(
        "offset metadata: a commit carries metadata given for offsets past it",
        "conveyor/processing/offset_metadata.py",
        (
            (
                "ready = [given for given in self._waiting if given <= offset]",
                "ready = list(self._waiting)",
            ),
        ),
        (
            "tests/unit/processing/test_offset_metadata.py::test_a_lane_ahead_of_the_others_commits_its_metadata_only_once_they_caught_up",
            "tests/unit/processing/test_offset_metadata.py::test_a_commit_held_back_by_an_unacknowledged_copy_holds_back_the_metadata_too",
        ),
    ),
    Mutation(
        "direct assignment: only the first assigned topic's partitions are assigned",
        "conveyor/processing/listener.py",
        (
            (
                "[(r.name, p) for r in self.routes.values() for p in r.assign or ()]",
                "[(r.name, p) for r in list(self.routes.values())[:1] for p in r.assign or ()]",
            ),
        ),
        (
            "tests/integration/processing/test_direct_assignment.py::test_one_consumer_class_reads_assigned_partitions_of_two_topics",
        ),
    ),
    Mutation(
        "direct assignment: assigned and subscribed topics may share a consumer group",
        "conveyor/routing/routes.py",
        (("        _check_assignments_apart(active)\n", ""),),
        (
            "tests/unit/routing/test_routes.py::test_assigned_and_subscribed_topics_may_not_share_a_consumer_group",
        ),
    ),
    Mutation(
        "alter_configs: a read-only broker config is sent to the broker",
        "conveyor/admin/configs.py",
        (("    if entry is not None and entry.read_only:", "    if False:"),),
        (
            "tests/integration/admin/test_admin.py::test_an_unknown_read_only_or_invalid_broker_config_is_refused_and_named",
            "tests/integration/admin/test_cli.py::test_configs_alter_sets_and_resets_a_dynamic_broker_config",
        ),
    ),
    Mutation(
        "oauth: a producer's first token is left to librdkafka's 10 s wait",
        "conveyor/driver/clients.py",
        (
            (
                '        settings["stats_cb"] = on_statistics\n    prime_token(settings)\n',
                '        settings["stats_cb"] = on_statistics\n',
            ),
        ),
        (
            "tests/unit/driver/test_credentials.py::test_a_producer_takes_an_oauth_token_provider_as_the_app_does",
        ),
    ),
    Mutation(
        "listener packing: a consumer group's undeclared routes all stay on one listener",
        "conveyor/routing/packing.py",
        (
            (
                "        if max_listeners < 2 or len(units) < 2:",
                "        if True:",
            ),
        ),
        (
            "tests/unit/routing/test_packing.py::TestPackRoutes::test_four_topics_on_two_listeners",
            "tests/integration/processing/test_listener_packing.py::test_four_topics_on_two_listeners",
        ),
    ),
    Mutation(
        "listener packing: every topic weighs one partition, whatever the metadata says",
        "conveyor/routing/packing.py",
        (
            (
                "            total += counts.get(route.name) or route.partitions or 1",
                "            total += 1",
            ),
        ),
        (
            "tests/unit/routing/test_packing.py::TestPackRoutes::test_four_topics_on_two_listeners",
            "tests/unit/routing/test_packing.py::TestPackRoutes::test_unknown_topics_weigh_their_declared_partitions_else_one",
        ),
    ),
    Mutation(
        "tracing: a child of an unsampled parent in a batch of one is built as a span",
        "conveyor/tracing/tracer.py",
        (
            (
                "                return api.CarriedProcess(api, remote)",
                "                return api.CarriedProcess(api, self.start_span('p', api.SpanKind.CONSUMER, {}))",
            ),
        ),
        ("tests/unit/tracing/test_sampling.py",),
    ),
    Mutation(
        "tracing: an unsampled lone message's context is not restored after consume()",
        "conveyor/tracing/carried.py",
        (("        self._api.detach(self._token)", "        pass"),),
        ("tests/unit/tracing/test_sampling.py",),
    ),
    Mutation(
        "tracing: a kept batch root started without its links",
        "conveyor/tracing/process_span.py",
        (("                links=tracing.links_of(batch),", "                links=None,"),),
        (
            "tests/integration/tracing/test_tracing.py::test_process_spans_link_to_every_message_of_their_batch",
        ),
    ),
    Mutation(
        "tracing: a sampler built from OTEL_TRACES_SAMPLER is asked instead of read",
        "conveyor/tracing/sampling.py",
        (
            (
                "    return type(sampler) in known - {None}",
                "    return type(sampler) is sampling.ParentBased",
            ),
        ),
        ("tests/unit/tracing/test_sampling.py",),
    ),
    Mutation(
        "replication: a topic created without a factor gets one replica, not the cluster's",
        "conveyor/admin/admin.py",
        (("            replicas = CLUSTER_DEFAULT", "            replicas = 1"),),
        (
            "tests/integration/broker/test_cluster.py::test_every_topic_conveyor_creates_takes_the_clusters_replicas",
        ),
    ),
    Mutation(
        "environment: the App's settings are not read from their variables",
        "conveyor/environment.py",
        (("        text = environ.get(variable.name)", "        text = None"),),
        ("tests/unit/test_environment.py",),
    ),
    Mutation(
        "logs: a line per consumed batch at INFO",
        "conveyor/instrumentation/logging_listener.py",
        (
            (
                "            self._by_level.append(monitor.subscribe(events.CONSUMER_CONSUMED, self.on_consumed))",
                "        if True:\n            self._by_level.append(monitor.subscribe(events.CONSUMER_CONSUMED, self.on_consumed))",
            ),
        ),
        (
            "tests/integration/processing/test_server_logs.py",
            "tests/unit/instrumentation/test_logging.py::test_batches_and_deliveries_are_listened_to_only_at_debug",
        ),
    ),
    Mutation(
        "commands: a process with a key carries out unsigned requests",
        "conveyor/web/process/command_handler.py",
        (
            (
                '            ""\n            if self.signer is None\n            else self.signer.refusal(',
                '            ""\n            if True\n            else self.signer.refusal(',
            ),
        ),
        ("tests/integration/web/test_signed_commands.py",),
    ),
    Mutation(
        "schedules: a schedule for a topic the app does not route is sent",
        "conveyor/schedules/dispatcher.py",
        (("            if not self.allows(target):", "            if False:"),),
        (
            "tests/integration/processing/test_scheduled_messages.py::test_a_schedule_for_a_topic_the_app_does_not_route_is_refused_and_never_sent",
        ),
    ),
    Mutation(
        "acls: apply creates nothing",
        "conveyor/cli/acls.py",
        (("        app.admin.create_acls(planned)", "        pass"),),
        (
            "tests/integration/security/test_secure_connections.py::test_acls_leave_the_control_topics_to_the_app_and_its_operator",
        ),
    ),
    Mutation(
        "backpressure: a drained backlog is paused all the same",
        "conveyor/processing/partition_core.py",
        (
            (
                "if self.backpressure or self.revoked or self.pending.size < self._low_water:",
                "if self.backpressure or self.revoked:",
            ),
        ),
        (
            "tests/unit/processing/test_executor.py::TestFlowControl::test_a_backlog_drained_before_the_listener_throttles_is_not_paused",
            "tests/unit/processing/virtual/test_virtual_executor.py::test_lanes_that_drained_the_backlog_before_the_listener_throttles_leave_it_unpaused",
        ),
    ),
    Mutation(
        "tracing: the first of several traceparent headers is the parent (the fast reader)",
        "conveyor/tracing/tracer.py",
        (
            (
                "                found = value  # the last one wins, as in Message.headers",
                "                found = value if found is _NONE else found",
            ),
        ),
        (
            "tests/unit/tracing/test_tracer.py::test_of_several_traceparent_headers_the_last_one_is_the_parent",
            "tests/integration/tracing/test_tracing.py::test_of_two_traceparent_headers_the_last_one_is_the_parent",
        ),
    ),
    Mutation(
        "tracing: the propagator's getter gives the first of several traceparent headers",
        "conveyor/tracing/headers.py",
        (
            (
                "                last = value\n",
                "                last = value if last is None else last\n",
            ),
        ),
        (
            "tests/unit/tracing/test_headers.py::test_the_getter_reads_ascii_values_and_the_setter_appends",
            "tests/unit/tracing/test_tracer.py::test_of_several_traceparent_headers_the_last_one_is_the_parent",
            "tests/integration/tracing/test_tracing.py::test_of_two_traceparent_headers_the_last_one_is_the_parent",
        ),
    ),
    Mutation(
        "broadcast: a pushed record carries no trace context for the client",
        "conveyor/connect/sinks/broadcast.py",
        (
            (
                "traceparent = None if field is None else delivery_traceparent(record)",
                "traceparent = None",
            ),
        ),
        (
            "tests/unit/connect/test_broadcast_trace.py::test_each_record_carries_the_context_of_the_span_delivering_it",
            "tests/integration/connect/test_broadcast.py::test_a_client_continues_the_trace_of_each_record_it_is_pushed",
        ),
    ),
    Mutation(
        "sinks: deliver runs without the published spans' context",
        "conveyor/connect/consumer.py",
        (
            (
                "        self.delivering = delivering(records, spans.traceparents)",
                "        self.delivering = delivering(records, [''] * len(records))",
            ),
        ),
        (
            "tests/integration/connect/test_broadcast.py::test_a_client_continues_the_trace_of_each_record_it_is_pushed",
        ),
    ),
    Mutation(
        "admin: an append to a list config replaces the list",
        "conveyor/driver/admin.py",
        (('    "append": AlterConfigOpType.APPEND,', '    "append": AlterConfigOpType.SET,'),),
        (
            "tests/integration/admin/test_admin.py::test_items_are_appended_to_and_subtracted_from_a_list_config",
            "tests/integration/admin/test_cli.py::test_configs_alter_appends_to_and_subtracts_from_a_list_config",
        ),
    ),
    Mutation(
        "admin: topics alter leaves the partitions as they were",
        "conveyor/cli/admin.py",
        (("        admin.create_partitions(name, after)", "        pass"),),
        (
            "tests/integration/admin/test_cli.py::test_topics_alter_grows_partitions_and_changes_configs",
        ),
    ),
    Mutation(
        "oauth: a provider's principal and extensions are dropped",
        "conveyor/driver/oauth.py",
        (("        if principal is not None or extensions is not None:", "        if False:"),),
        (
            "tests/unit/test_oauth_settings.py::test_a_provider_may_give_a_principal_and_extensions",
            "tests/unit/test_oauth_settings.py::test_a_bad_principal_or_extension_fails_priming_naming_the_provider",
        ),
    ),
    Mutation(
        "oauth: the unsecured-JWT config and the OIDC extensions are left to the first login",
        "conveyor/validation.py",
        (("    check_oauth_settings(kafka, where)\n", ""),),
        (
            "tests/unit/test_oauth_settings.py::test_a_bad_unsecured_jwt_config_is_refused_naming_it",
            "tests/unit/test_oauth_settings.py::test_oidc_extensions_are_checked_and_the_environment_is_named",
        ),
    ),
    Mutation(
        "sinks: batch_interval is not passed to the lanes",
        "conveyor/connect/routing.py",
        (('        "linger": float(batch_interval),', '        "linger": 0.0,'),),
        (
            "tests/integration/connect/test_sinks.py::test_a_batch_interval_gathers_records_into_one_write_and_a_lone_one_still_goes",
        ),
    ),
    Mutation(
        "explorer: a long key without spaces widens the message page",
        "conveyor/web/ui/static/conveyor.css",
        (("#message-key { min-width: 0; overflow-wrap: anywhere; }", "#message-key { }"),),
        (
            "tests/integration/web/test_browser_keys.py::test_long_and_binary_keys_stay_in_the_layout_and_are_reachable_whole",
        ),
    ),
    Mutation(
        "rpc: models inside an optional or a container (Order | None, list[Order]) arrive as dicts",
        "conveyor/models/arguments.py",
        (
            (
                '            if name != "return" and models_in(hint)\n',
                '            if name != "return" and models_in(hint) == [hint]\n',
            ),
        ),
        (
            "tests/unit/models/test_arguments.py::test_models_inside_optionals_and_containers_arrive_as_instances",
            "tests/integration/models/test_typed_messages.py::test_rpc_arguments_with_models_inside_optionals_and_lists_arrive_as_instances",
        ),
    ),
    Mutation(
        "asyncapi: two models of one name are one component (the first met)",
        "conveyor/asyncapi/schemas.py",
        (
            (
                "        placed = self._placed.get(identity)\n",
                "        placed = self._placed.get(identity) or (_key(name) if _key(name) in self._owners else None)\n",
            ),
        ),
        (
            "tests/unit/asyncapi/test_document.py::test_models_of_one_name_from_two_modules_are_two_components",
        ),
    ),
    Mutation(
        "testing: a typed route's invalid payload raises in consume() instead of taking the route's policy",
        "conveyor/testing/partition.py",
        (
            (
                "        if not self.route.deserializers.validates:\n",
                "        if True:\n",
            ),
        ),
        (
            "tests/unit/testing/test_typed_routes.py::test_an_invalid_payload_goes_to_the_dlq_at_once_and_the_others_are_consumed_in_order",
            "tests/unit/examples/test_shop.py::test_an_order_that_does_not_fit_the_model_goes_to_the_dlq_and_charges_nothing",
        ),
    ),
    Mutation(
        "schedules: every app's default schedules topic is the one shared conveyor_schedules",
        "conveyor/schedules/wire.py",
        (
            (
                "    topic = f\"{_NOT_IN_A_TOPIC.sub('_', group)}_schedules\"",
                "    topic = DEFAULT_TOPIC",
            ),
        ),
        (
            "tests/integration/schedules/test_two_apps.py::test_two_apps_on_one_cluster_each_dispatch_only_their_own_schedules",
            "tests/unit/schedules/test_default_topic.py::test_two_apps_named_apart_have_schedules_topics_apart",
        ),
    ),
    Mutation(
        "web: a read that timed out is answered as any Kafka error (503)",
        "conveyor/web/ui/failures.py",
        (("        if timed_out(exc):", "        if False:"),),
        (
            "tests/integration/web/test_explorer_timeout.py::test_a_read_that_times_out_says_so_with_a_504_not_a_404",
        ),
    ),
    Mutation(
        "schedules page: each load reads the schedules topic from its start again",
        "conveyor/web/reading/schedules.py",
        (
            (
                "        fold = self._folds.setdefault((kind, topic), _Fold())",
                "        fold = self._folds[(kind, topic)] = _Fold()",
            ),
        ),
        (
            "tests/integration/schedules/test_schedules_page_reads.py::test_a_second_load_reads_only_the_records_written_since_the_first",
            "tests/unit/web/reading/test_schedule_reader.py::test_a_later_read_asks_only_for_what_was_written_since",
        ),
    ),
    Mutation(
        "schedules page: a recurring task's name does not wrap (the table runs past its card)",
        "conveyor/web/ui/templates/schedules.html",
        (
            (
                '<td class="wrap"><code>{{ t.name }}</code></td>',
                "<td><code>{{ t.name }}</code></td>",
            ),
        ),
        (
            "tests/integration/schedules/test_schedules_browser.py::test_a_schedule_is_cancelled_and_a_task_disabled_from_the_browser",
        ),
    ),
    Mutation(
        "lags page: an offset committed without metadata shows a bare dash",
        "conveyor/web/ui/templates/lags.html",
        (
            (
                '<span class="empty" title="committed without metadata: mark_as_consumed(message, metadata=...) commits some">none</span>',
                "\u2013",
            ),
        ),
        (
            "tests/integration/web/test_lags_metadata.py::test_the_lags_page_says_none_for_an_offset_committed_without_metadata",
        ),
    ),
    Mutation(
        "eofed: reached_end runs while a tail of the batch taken at the end waits",
        "conveyor/processing/executor.py",
        (("eof = eof and self._end_still_reached(batch[-1].offset())", "eof = eof"),),
        (
            "tests/unit/processing/test_executor.py::TestFlowControl::test_the_end_is_reached_after_a_tail_that_went_back_to_wait",
            "tests/integration/processing/test_consuming.py::test_the_end_is_reached_after_a_retried_tail",
        ),
    ),
    Mutation(
        "eofed: lanes reach the end while a lane's queue still waits",
        "conveyor/processing/virtual/executor.py",
        (("or self._ticking or queued(self.lanes):", "or self._ticking:"),),
        (
            "tests/unit/processing/virtual/test_virtual_executor.py::test_the_end_is_not_reached_while_a_lane_holds_messages_that_wait",
        ),
    ),
    Mutation(
        "eofed: an end told before a seek survives it",
        "conveyor/processing/partition_core.py",
        (
            (
                "            self.eof = False  # librdkafka tells the end again once the read gets there\n",
                "",
            ),
        ),
        (
            "tests/unit/processing/test_executor.py::TestFlowControl::test_a_seek_forgets_an_end_that_was_reached",
        ),
    ),
    Mutation(
        "throttle: a tail that comes back within the interval is counted again",
        "conveyor/processing/filters.py",
        (("if any(first <= offset <= last for first, last in counted):", "if False:"),),
        ("tests/unit/processing/test_filters.py::test_throttle_counts_a_put_back_tail_once",),
    ),
    Mutation(
        "commits: a commit the group refused is neither reported nor logged",
        "conveyor/driver/consumers.py",
        (("            self._on_commit_refused(offsets, failure, sync)\n", "            pass\n"),),
        (
            "tests/integration/processing/test_direct_assignment.py::test_a_commit_the_group_refuses_is_reported",
        ),
    ),
    Mutation(
        "commits: an asynchronous commit the group refused counts as done",
        "conveyor/processing/commits.py",
        (
            (
                "            if self.offsets.get((topic, partition)) == offset:",
                "            if False:",
            ),
        ),
        (
            "tests/unit/processing/test_offset_metadata.py::test_an_asynchronous_commit_the_group_refused_is_sent_again",
        ),
    ),
    Mutation(
        "listener: a command from another thread waits for the poll slice",
        "conveyor/processing/listener_thread.py",
        (
            (
                "        if threading.current_thread() is not self.current:\n            self._wake()\n",
                "",
            ),
        ),
        (
            "tests/integration/processing/test_consuming.py::test_steering_from_another_thread_wakes_a_waiting_listener",
        ),
    ),
    Mutation(
        "consumer wake: a wake leaves the poll waiting",
        "conveyor/driver/consumers.py",
        (("            self._wake.wake()\n", "            pass\n"),),
        (
            "tests/unit/driver/test_consumer_wake.py::test_a_wake_ends_the_wait_of_a_poll_in_another_thread",
        ),
    ),
    Mutation(
        "delivery: a timed-out delivery's handle completes without asking about its topic",
        "conveyor/driver/producers.py",
        (
            (
                "        self.clarify: Clarify | None = self.explainer.explain\n",
                "        self.clarify: Clarify | None = None\n",
            ),
        ),
        (
            "tests/integration/producer/test_awaiting.py::test_timed_out_deliveries_are_explained_off_the_event_loop",
        ),
    ),
    Mutation(
        "delivery: persistence by the error's name alone",
        "conveyor/driver/delivery_errors.py",
        (
            (
                "    if name in NOT_PERSISTED or partition is None or missing:",
                "    if name in NOT_PERSISTED:",
            ),
        ),
        (
            "tests/unit/driver/test_handles.py::test_a_message_that_never_had_a_partition_was_not_persisted",
            "tests/unit/driver/test_handles.py::test_a_timed_out_delivery_completes_once_asked_whether_its_topic_exists",
            "tests/integration/producer/test_awaiting.py::test_timed_out_deliveries_are_explained_off_the_event_loop",
        ),
    ),
    Mutation(
        "delivery: a timeout to a missing topic says it may have been written",
        "conveyor/driver/delivery_errors.py",
        (
            (
                "            if missing\n            else _NEVER_SENT",
                "            if False\n            else _NEVER_SENT",
            ),
        ),
        (
            "tests/unit/driver/test_handles.py::test_a_timed_out_delivery_completes_once_asked_whether_its_topic_exists",
        ),
    ),
    Mutation(
        "delivery: a message refused at produce() counts as possibly persisted",
        "conveyor/driver/producers.py",
        (
            (
                '        failure.persistence = "not_persisted"  # it never entered librdkafka\'s queue\n',
                "",
            ),
        ),
        (
            "tests/unit/driver/test_producers.py::test_a_message_librdkafka_refused_at_once_was_not_persisted",
        ),
    ),
    Mutation(
        "delivery: a default produce_sync waits 0.7 s past message.timeout.ms",
        "conveyor/producer/producer.py",
        (
            (
                "MESSAGE_TIMEOUT_MARGIN = _EXPIRY_SCAN + SERVE_SLICE + EXPLAINED_WITHIN + _SCHEDULING",
                "MESSAGE_TIMEOUT_MARGIN = 0.7",
            ),
        ),
        (
            "tests/integration/producer/test_producing.py::test_a_default_produce_sync_to_a_missing_topic_raises_the_delivery_error",
        ),
    ),
    Mutation(
        "explainer: a question that waited too long is asked all the same",
        "conveyor/driver/explainer.py",
        (
            (
                "                fresh = not closed and time.monotonic() - asked_at < _STALE",
                "                fresh = not closed",
            ),
        ),
        (
            "tests/unit/driver/test_explainer.py::test_a_question_that_waited_too_long_is_answered_not_asked",
        ),
    ),
    Mutation(
        "jobs: a malformed attempt header fails its batch, retried forever",
        "conveyor/jobs/queues.py",
        (
            (
                "        try:\n            attempt = attempt_of(raw_headers)\n"
                "        except ValueError as error:  # read again, it would fail again: dead at once\n"
                "            self._dead(message, raw_headers, None, error)\n            return\n",
                "        attempt = attempt_of(raw_headers)\n",
            ),
        ),
        (
            "tests/unit/jobs/test_queues.py::test_a_malformed_attempt_header_makes_the_job_die_saying_so",
            "tests/integration/jobs/test_jobs.py::test_a_malformed_attempt_header_makes_the_job_die_at_once_saying_so",
        ),
    ),
    Mutation(
        "jobs: an envelope whose enqueued_at cannot be read fails its batch, retried forever",
        "conveyor/jobs/wire.py",
        (("        or not (0 <= enqueued_at < _LATEST)\n", ""),),
        ("tests/unit/jobs/test_queues.py::test_a_malformed_envelope_makes_the_job_die_saying_so",),
    ),
    Mutation(
        "jobs: key= is always the message key, a parameter named key cannot be passed",
        "conveyor/jobs/job.py",
        (('        if self.takes_key or "key" not in kwargs:', '        if "key" not in kwargs:'),),
        (
            "tests/unit/jobs/test_enqueue.py::test_a_parameter_named_key_is_the_functions_and_options_set_the_message_key",
            "tests/integration/jobs/test_jobs.py::test_a_parameter_named_key_and_schedules_enabled_after_the_first_job",
        ),
    ),
    Mutation(
        "schedules: enable() after the first @app.job raises",
        "conveyor/schedules/dispatcher.py",
        (
            (
                "            self._enable_again(topic, partitions, replication_factor, allowed)\n",
                '            raise ConfigurationError("app.schedules.enable() was called twice", "schedules")\n',
            ),
        ),
        (
            "tests/unit/jobs/test_queues.py::test_schedules_enable_after_the_first_job_sets_them_up_as_given",
            "tests/integration/jobs/test_jobs.py::test_a_parameter_named_key_and_schedules_enabled_after_the_first_job",
        ),
    ),
    Mutation(
        "jobs: an enqueue inside the consumer's transaction is sent outside it",
        "conveyor/jobs/job.py",
        (("        if open_transaction() is None:", "        if True:"),),
        (
            "tests/unit/jobs/test_enqueue.py::test_an_enqueue_inside_the_apps_transaction_is_part_of_it",
            "tests/integration/jobs/test_jobs.py::test_a_consumer_hands_off_to_a_job_inside_its_transaction",
        ),
    ),
    Mutation(
        "jobs: a failure's retry or death is stored apart from its offset",
        "conveyor/jobs/queues.py",
        (("        if executor.in_lane:\n", "        if True:\n"),),
        (
            "tests/integration/jobs/test_jobs_sigkill.py::test_a_kill_right_after_a_failure_was_stored_runs_that_attempt_not_again",
        ),
    ),
    Mutation(
        "jobs: a retry's schedule is named by the message that failed, not the job and attempt",
        "conveyor/jobs/queues.py",
        (
            (
                '            f"job-{job_id}-{attempt}"\n            if job_id',
                '            f"job-{message.offset}-{attempt}"\n            if job_id',
            ),
        ),
        (
            "tests/integration/jobs/test_jobs.py::test_an_attempt_read_twice_is_retried_once_and_dies_once",
        ),
    ),
    Mutation(
        "jobs: a batch's jobs are marked when the batch ends, not each as it ends",
        "conveyor/jobs/queues.py",
        (
            (
                "            self._run(message)\n"
                "            # each job marked as it ends: a crash runs again the jobs in flight, not the batch\n"
                "            self.mark_as_consumed(message)\n",
                "            self._run(message)\n",
            ),
        ),
        (
            "tests/integration/jobs/test_jobs_sigkill.py::test_after_a_kill_only_the_job_in_flight_runs_again",
        ),
    ),
    Mutation(
        "jobs: a queue commits on the app's 5 s interval",
        "conveyor/jobs/queues.py",
        (
            (
                '            "kafka": {"auto.commit.interval.ms": max(1, round(commit_interval * 1000))},\n',
                "",
            ),
        ),
        ("tests/unit/jobs/test_queues.py::test_a_queue_commits_its_offsets_every_commit_interval",),
    ),
    Mutation(
        "cli: jobs discard --all discards nothing",
        "conveyor/cli/jobs.py",
        (("        selection = _all_dead(app, target)", "        selection = []"),),
        ("tests/integration/jobs/test_jobs_cli.py::test_every_dead_job_is_discarded_with_all",),
    ),
    Mutation(
        "web: one DLQ that cannot be counted fails the whole DLQ list",
        "conveyor/web/ui/explorer_views.py",
        (
            (
                "                except ConveyorError as exc:  # a timeout",
                "                except ZeroDivisionError as exc:  # a timeout",
            ),
        ),
        (
            "tests/unit/web/ui/test_dlq_list.py::test_one_dlq_that_cannot_be_counted_leaves_the_rest_of_the_list",
        ),
    ),
    Mutation(
        "app features: a feature read after a producer was made leaves that producer unhooked",
        "conveyor/app_producers.py",
        (
            (
                "            for producer in (self.plain, self.transactional):\n"
                "                if producer is not None:\n"
                "                    feature.attach(producer)\n",
                "",
            ),
        ),
        (
            "tests/unit/test_app_features.py::test_a_producer_made_before_latency_is_read_is_stamped_once_it_is_enabled",
            "tests/unit/schedules/test_default_topic.py::test_the_apps_producers_write_schedules_to_its_topic_unless_told_otherwise",
        ),
    ),
    Mutation(
        "app features: a new producer takes the features' hooks in the order they were read",
        "conveyor/app_producers.py",
        (
            (
                '_HOOKS = ("tracing", "latency", "schedules")',
                '_HOOKS = ("latency", "tracing", "schedules")',
            ),
        ),
        (
            "tests/unit/test_app_features.py::test_a_producer_made_after_the_features_has_their_hooks_in_one_order",
        ),
    ),
    Mutation(
        "web: one topic deleted or unread fails the whole topics page",
        "conveyor/web/ui/views.py",
        (
            (
                "            except ConveyorError as exc:  # one topic unread",
                "            except ZeroDivisionError as exc:  # one topic unread",
            ),
        ),
        (
            "tests/unit/web/ui/test_views.py::test_a_topic_deleted_or_unread_leaves_the_rest_of_the_topics_page",
        ),
    ),
    Mutation(
        "state: a failed batch's store writes kept for its retry",
        "conveyor/processing/executor.py",
        (
            (
                "            self.stores.discard()  # what the failed batch wrote is gone with it",
                "            pass",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_a_memory_store_is_restored_in_full_and_a_failed_batch_writes_nothing",
        ),
    ),
    Mutation(
        "state: the changelog offset reached not kept with the store (a warm restart replays all)",
        "conveyor/state/partition_stores.py",
        (
            (
                "                meta[_CHANGELOG_OFFSET] = str(report.offset + 1).encode()",
                "                pass",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_counts_stay_exact_across_a_warm_restart_and_a_restore_from_the_changelog_alone",
        ),
    ),
    Mutation(
        "state: a store opened without replaying its changelog",
        "conveyor/state/partition_stores.py",
        (
            (
                "            records, size, end = self._replay(reader, topic, backend, start, high, name)",
                "            records, size, end = 0, 0, high",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_counts_stay_exact_across_a_warm_restart_and_a_restore_from_the_changelog_alone",
        ),
    ),
    Mutation(
        "state: a batch's store writes never reach the changelog",
        "conveyor/processing/executor.py",
        (
            (
                "            if not deferred and not self._flushed(stores, batch, started):",
                "            if False:",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_a_memory_store_is_restored_in_full_and_a_failed_batch_writes_nothing",
        ),
    ),
    Mutation(
        "state: a flush marks the batches' offsets without writing their stores",
        "conveyor/processing/store_flush.py",
        (
            (
                "            if stores.dirty:\n                stores.flush(owner.producer())",
                "            if False:\n                pass",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_a_hot_key_written_by_many_batches_costs_one_changelog_record_per_flush",
        ),
    ),
    Mutation(
        "state: a job whose backlog ran dry flushes at once (the interval ignored)",
        "conveyor/processing/store_flush.py",
        (("        if held or left <= 0:", "        if True:"),),
        (
            "tests/integration/state/test_stores.py::test_a_partition_whose_backlog_runs_dry_flushes_once_per_interval_and_as_the_app_stops",
        ),
    ),
    Mutation(
        "state: no timer flushes what an idle partition kept",
        "conveyor/processing/store_flush.py",
        (
            (
                "            self._timer = self._timers.call_later(left, self._owner.flush_due)",
                "            pass",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_a_partition_whose_backlog_runs_dry_flushes_once_per_interval_and_as_the_app_stops",
        ),
    ),
    Mutation(
        "state: a stopping app drops what its idle partitions kept",
        "conveyor/processing/partition_core.py",
        (("        self.flush_idle()\n", ""),),
        (
            "tests/integration/state/test_stores.py::test_a_partition_whose_backlog_runs_dry_flushes_once_per_interval_and_as_the_app_stops",
        ),
    ),
    Mutation(
        "state: a revoked partition commits without flushing what it kept",
        "conveyor/processing/assignments.py",
        (("                    executors[partition].flush_idle()", "                    pass"),),
        (
            "tests/unit/processing/test_assignments.py::test_a_revoked_partition_flushes_its_kept_store_writes_before_its_commit",
        ),
    ),
    Mutation(
        "state: store writes flushed at each batch's end (the flush interval ignored)",
        "conveyor/processing/store_flush.py",
        (
            (
                "        if self._left() <= 0 or stores.kept >= KEPT_MAX:",
                "        if True:",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_a_hot_key_written_by_many_batches_costs_one_changelog_record_per_flush",
        ),
    ),
    Mutation(
        "state: a job ending with writes kept neither flushes them nor asks a timer to",
        "conveyor/processing/executor.py",
        (
            (
                "                    flush = (ending and self._flush_at_end()) or self._rebuild_asked is not None",
                "                    flush = self._rebuild_asked is not None",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_a_partition_whose_backlog_runs_dry_flushes_once_per_interval_and_as_the_app_stops",
        ),
    ),
    Mutation(
        "state: a window's closing times kept after a failed batch (its closed windows lost)",
        "conveyor/state/windows.py",
        (
            (
                "        if self._index is not None and self._generation == state.generation:",
                "        if self._index is not None:",
            ),
        ),
        (
            "tests/unit/state/test_windows.py::test_a_window_a_failed_batch_closed_closes_again_when_the_batch_runs_again[session]",
        ),
    ),
    Mutation(
        "state: Store(rebuild=True) stops the partition as if it were False",
        "conveyor/state/partition_stores.py",
        (("                        if not store.rebuild:", "                        if True:"),),
        (
            "tests/integration/state/test_stores.py::test_a_changelog_recreated_under_a_warm_store_stops_its_partition_or_rebuilds_it",
        ),
    ),
    Mutation(
        "transactions: a slow send_offsets waits out its timeout un-nudged (#5511)",
        "conveyor/driver/producers.py",
        (
            (
                "                kafka.list_topics(timeout=2.0)\n        if not returned.is_set():",
                "                pass\n        if not returned.is_set():",
            ),
        ),
        (
            "tests/unit/driver/test_producers.py::test_a_send_offsets_waiting_for_a_returned_broker_is_nudged_on_and_the_client_kept",
        ),
    ),
    Mutation(
        "state: a failed batch drops the earlier batches' unflushed writes too",
        "conveyor/state/view.py",
        (
            (
                """        self._writes.clear()
        for layer in self._layers:
            layer.discard()""",
                """        self._clear()
        for layer in self._layers:
            layer.discard()""",
            ),
        ),
        (
            "tests/unit/state/test_store.py::test_a_failed_batch_drops_its_own_writes_and_keeps_the_earlier_batches_for_the_flush",
            "tests/integration/state/test_stores.py::test_a_hot_key_written_by_many_batches_costs_one_changelog_record_per_flush",
        ),
    ),
    Mutation(
        "state: reads do not see the batch's own writes",
        "conveyor/state/view.py",
        (
            (
                """    def get(self, key: Any, default: Any = None) -> Any:
        value = self._writes.get(key, _MISSING)""",
                """    def get(self, key: Any, default: Any = None) -> Any:
        value = _MISSING""",
            ),
        ),
        (
            "tests/unit/state/test_store.py::test_reads_see_the_batch_s_writes_and_a_key_is_written_once_per_batch",
        ),
    ),
    Mutation(
        "state: a transaction's store writes flushed after its commit, outside it",
        "conveyor/consumer.py",
        (
            (
                "                apply_state = self._executor.stage_state(producer)",
                "                apply_state = None",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_a_transaction_commits_its_store_writes_to_the_changelog_with_its_offset",
            "tests/integration/state/test_exactly_once_state.py::test_counts_are_exact_through_repeated_sigkills_under_exactly_once",
        ),
    ),
    Mutation(
        "state: changelogs left out of topics plan",
        "conveyor/admin/declarative.py",
        (
            (
                "        routes += changelog_routes(routes, admin.partition_counts())",
                "        pass",
            ),
        ),
        (
            "tests/integration/state/test_changelogs.py::test_plan_and_migrate_create_each_store_s_compacted_changelog",
        ),
    ),
    Mutation(
        "state: a changelog of another partition count accepted",
        "conveyor/state/changelogs.py",
        (("        elif have != wanted:", "        elif False:"),),
        (
            "tests/integration/state/test_changelogs.py::test_a_changelog_with_another_partition_count_stops_the_start",
        ),
    ),
    Mutation(
        "state: a route window's results sent outside a transaction under exactly_once",
        "conveyor/state/declaration.py",
        (("            if windowed.exactly_once:", "            if False:"),),
        (
            "tests/integration/state/test_exactly_once_state.py::test_each_final_window_is_emitted_exactly_once_through_repeated_sigkills",
        ),
    ),
    Mutation(
        "state: a restore's progress not kept as it goes (a cut-short restore starts over)",
        "conveyor/state/partition_stores.py",
        (
            (
                "                    _write(write, changes, end)",
                "                    write(changes, {}, wal=False)",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_a_restore_cut_short_keeps_its_progress_and_the_next_one_goes_on_from_there",
        ),
    ),
    Mutation(
        "state: stores restored at a partition's first message, not at its assignment",
        "conveyor/processing/assignments.py",
        (("        self._listener.prepare(partitions)", "        pass"),),
        (
            "tests/integration/state/test_stores.py::test_a_restore_cut_short_keeps_its_progress_and_the_next_one_goes_on_from_there",
        ),
    ),
    Mutation(
        "state: a tumbling count's column-wise fold counts a late message",
        "conveyor/state/windows.py",
        (
            (
                "            if any(map(operator.le, ends, accumulate(times, max, initial=stream))):",
                "            if False:",
            ),
        ),
        (
            "tests/unit/state/test_windows.py::test_a_tumbling_count_counted_column_wise_agrees_with_message_by_message",
        ),
    ),
    Mutation(
        "state: a joint transaction's commit stages the running batch's writes too",
        "conveyor/processing/joint_transaction.py",
        (
            (
                "            apply = member.stage_state(producer, kept_only=True)",
                "            apply = member.stage_state(producer)",
            ),
        ),
        (
            "tests/unit/processing/test_joint_transaction.py::test_blocks_of_two_partitions_commit_together_once_the_interval_is_over",
        ),
    ),
    Mutation(
        "state: a partition's first block in a joint transaction leaves the writes waiting for its flush to it",
        "conveyor/processing/joint_transaction.py",
        (
            (
                "                    waiting = member.adopt_kept()",
                "                    waiting = None",
            ),
        ),
        (
            "tests/unit/processing/test_joint_transaction.py::test_writes_waiting_for_a_partition_s_flush_join_its_first_block_s_transaction",
            "tests/integration/state/test_stores.py::test_writes_after_a_block_reach_the_changelog_beside_other_partitions_joint_commits",
        ),
    ),
    Mutation(
        "state: a commit of the kept writes clears the running batch's too",
        "conveyor/state/view.py",
        (
            (
                "        if kept_only:\n            kept, self._kept",
                "        if False:\n            kept, self._kept",
            ),
        ),
        (
            "tests/unit/state/test_store.py::test_a_commit_of_the_kept_writes_leaves_the_running_batch_s_alone",
        ),
    ),
    Mutation(
        "state: a batch's writes after its block are kept while a commit reads the kept ones",
        "conveyor/processing/joint_transaction.py",
        (
            (
                "            while self._closing:\n                self._cond.wait()\n            if member not in self._shares:",
                "            if member not in self._shares:",
            ),
        ),
        (
            "tests/unit/processing/test_joint_transaction.py::test_writes_after_a_block_are_kept_between_commits_not_during_one",
        ),
    ),
    Mutation(
        "state: a tumbling count's column-wise fold takes a message without a timestamp",
        "conveyor/state/windows.py",
        (("        if -1 in times:", "        if False:"),),
        (
            "tests/unit/state/test_windows.py::test_a_tumbling_count_counted_column_wise_agrees_with_message_by_message",
        ),
    ),
    Mutation(
        "state: a tumbling count's column-wise fold forgets the earlier batches' counts",
        "conveyor/state/windows.py",
        (
            (
                "                key: [count] if old is None else [old[0] + count]",
                "                key: [count] if old is None else [count]",
            ),
        ),
        (
            "tests/unit/state/test_windows.py::test_a_tumbling_count_counted_column_wise_agrees_with_message_by_message",
        ),
    ),
    Mutation(
        "state: a partition's stream time forgotten between batches",
        "conveyor/state/windows.py",
        (
            (
                "        self.late = []\n        window = self._window\n",
                "        self.late = []\n        stream = -1\n        window = self._window\n",
            ),
        ),
        ("tests/unit/state/test_windows.py::test_the_grace_boundary_and_late_messages",),
    ),
    Mutation(
        "state: the grace period ignored",
        "conveyor/state/windows.py",
        (
            (
                "                if span[1] + grace <= stream:\n                    continue  # closed already",
                "                if span[1] <= stream:\n                    continue  # closed already",
            ),
        ),
        ("tests/unit/state/test_windows.py::test_the_grace_boundary_and_late_messages",),
    ),
    Mutation(
        "state: a batch adds to the open window's accumulators in place, not to a copy",
        "conveyor/state/windows.py",
        (
            (
                "                        accumulators = [a.copy(was[i]) for i, a in enumerate(aggregations)]",
                "                        accumulators = was",
            ),
        ),
        (
            "tests/unit/state/test_windows.py::test_a_failed_batch_leaves_the_kept_batches_windows_unchanged",
        ),
    ),
    Mutation(
        "state: a key created and deleted between two flushes still leaves a tombstone",
        "conveyor/state/view.py",
        (("            elif key not in created:\n", "            else:\n"),),
        (
            "tests/unit/state/test_store.py::test_keys_created_and_deleted_between_two_flushes_leave_nothing_to_write",
            "tests/unit/state/test_windows.py::test_a_session_that_grew_between_two_flushes_writes_its_last_extent_only",
        ),
    ),
    Mutation(
        "state: a closed window's flushed keys stay in the store",
        "conveyor/state/open_windows.py",
        (("        elif stored:\n            self._gone[span] = stored\n", ""),),
        (
            "tests/unit/state/test_windows.py::test_a_window_writes_a_key_once_a_flush_and_nothing_for_a_window_closed_between_two",
        ),
    ),
    Mutation(
        "state: a window that opened and closed between two flushes writes tombstones",
        "conveyor/state/open_windows.py",
        (
            (
                "        elif stored:\n            self._gone[span] = stored\n",
                "        elif stored or dirty:\n            self._gone[span] = stored | dirty\n",
            ),
        ),
        (
            "tests/unit/state/test_windows.py::test_a_window_writes_a_key_once_a_flush_and_nothing_for_a_window_closed_between_two",
        ),
    ),
    Mutation(
        "state: a failed flush leaves the window's unflushed accumulators in memory",
        "conveyor/state/open_windows.py",
        (
            (
                "        self.stale = True\n        self._unsure = True\n",
                "        self.stale = False\n        self._unsure = True\n",
            ),
        ),
        (
            "tests/unit/state/test_windows.py::test_a_failed_flush_drops_the_unflushed_counts_and_a_new_owner_reads_the_flushed",
        ),
    ),
    Mutation(
        "state: a failed flush leaves the window's dropped accumulators for the next flush",
        "conveyor/state/open_windows.py",
        (("        self._drop()\n        self.stale = True\n", "        self.stale = True\n"),),
        (
            "tests/unit/state/test_windows.py::test_a_failed_flush_drops_the_unflushed_counts_and_a_new_owner_reads_the_flushed",
        ),
    ),
    Mutation(
        "state: after a failed flush a closing window deletes only the keys the store holds",
        "conveyor/state/open_windows.py",
        (("        if self._unsure:\n", "        if False:\n"),),
        (
            "tests/unit/state/test_windows.py::test_after_a_flush_that_failed_half_way_a_window_that_closes_deletes_every_key",
        ),
    ),
    Mutation(
        "state: after a failed flush create() still takes keys for absent",
        "conveyor/state/view.py",
        (
            (
                "        if not self._unsure:\n            self._created.update(rows)",
                "        self._created.update(rows)",
            ),
        ),
        (
            "tests/unit/state/test_store.py::test_keys_created_and_deleted_between_two_flushes_leave_nothing_to_write",
        ),
    ),
    Mutation(
        "state: the windows a failed batch closed are not tracked to close again",
        "conveyor/state/open_windows.py",
        (("            self.reopened = True\n", ""),),
        (
            "tests/unit/state/test_windows.py::test_a_window_a_failed_batch_closed_closes_again_when_the_batch_runs_again[tumbling]",
        ),
    ),
    Mutation(
        "state: a restore's flush leaves the changelog offset's column family in memory",
        "conveyor/state/backends.py",
        (("        self._meta_view.flush()\n", ""),),
        (
            "tests/unit/state/test_store.py::test_a_restore_written_without_the_wal_and_flushed_survives_a_sigkill",
        ),
    ),
    Mutation(
        "joins: a right record that arrives does not look for its left partners",
        "conveyor/state/joins.py",
        (
            (
                "            for at, left_offset, left_value in self._left.get(key, ()):",
                "            for at, left_offset, left_value in ():",
            ),
        ),
        (
            "tests/unit/state/test_joins.py::test_a_pair_is_found_once_whichever_side_comes_first",
            "tests/integration/state/test_joins.py::test_orders_pair_with_payments_once_each_whichever_came_first_and_after_a_restart",
        ),
    ),
    Mutation(
        "joins: the right records looked at are not counted with the batch",
        "conveyor/state/joins.py",
        (("        left_state[_PROBED] = str(self._probed).encode()\n", ""),),
        (
            "tests/unit/state/test_joins.py::test_after_a_restart_only_the_right_records_not_yet_paired_are_paired",
            "tests/integration/state/test_exactly_once_state.py::test_each_pair_of_a_join_is_emitted_exactly_once_through_repeated_sigkills",
        ),
    ),
    Mutation(
        "joins: a failed batch's pairs not found again (the sides not reloaded after it)",
        "conveyor/state/joins.py",
        (
            (
                "        if self._generation == left_state.generation:",
                "        if self._generation != -1:",
            ),
        ),
        (
            "tests/unit/state/test_joins.py::test_a_failed_batch_is_paired_again_from_what_the_stores_held",
        ),
    ),
    Mutation(
        "joins: a left message pairs with right records however far apart",
        "conveyor/state/joins.py",
        (
            (
                "            for at, offset, value in self._right.get(key, ()):\n                if abs(at - timestamp) <= within:",
                "            for at, offset, value in self._right.get(key, ()):\n                if True:",
            ),
        ),
        (
            "tests/unit/state/test_joins.py::test_the_window_s_bounds_are_inclusive_and_keys_must_match",
            "tests/integration/state/test_joins.py::test_orders_pair_with_payments_once_each_whichever_came_first_and_after_a_restart",
        ),
    ),
    Mutation(
        "joins: a right record deleted from its store as soon as memory forgot it",
        "conveyor/state/joins.py",
        (
            (
                "        durable = left_state.stored(_STREAM_TIME)",
                "        durable = str(self._stream).encode()",
            ),
        ),
        (
            "tests/unit/state/test_joins.py::test_a_failed_batch_that_forgot_a_right_record_finds_it_again_on_its_retry",
        ),
    ),
    Mutation(
        "joins: nothing is forgotten however old",
        "conveyor/state/joins.py",
        (("        while expiry and expiry[0][0] < oldest:", "        while False:"),),
        (
            "tests/unit/state/test_joins.py::test_what_is_too_old_to_pair_is_forgotten_on_both_sides",
        ),
    ),
    Mutation(
        "joins: a joined stream restored as a table (by key, its records' times lost)",
        "conveyor/state/partition_stores.py",
        (
            (
                "        rows = stream_row if self.declared[name].stream else None  # a joined stream's records",
                "        rows = None",
            ),
        ),
        (
            "tests/integration/state/test_joins.py::test_orders_pair_with_payments_once_each_whichever_came_first_and_after_a_restart",
        ),
    ),
    Mutation(
        "virtual partitions: a lane's store writes not flushed before its offsets finish",
        "conveyor/processing/virtual/lane_stores.py",
        (("            stores.flush_lane(views, self._owner.producer())", "            pass"),),
        (
            "tests/integration/state/test_stores.py::test_virtual_partitions_count_each_key_exactly_through_a_failed_lane_and_a_restart",
        ),
    ),
    Mutation(
        "virtual partitions: a failed lane batch's store writes kept",
        "conveyor/processing/virtual/executor.py",
        (
            (
                "            self.lane_stores.discard(lane)  # what the failed batch wrote is gone with it",
                "            pass",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_virtual_partitions_count_each_key_exactly_through_a_failed_lane_and_a_restart",
        ),
    ),
    Mutation(
        "state: a rebuild keeps the local copy's files (restores over them)",
        "conveyor/state/partition_stores.py",
        (("                shutil.rmtree(held[0], ignore_errors=True)\n", ""),),
        (
            "tests/integration/state/test_stores.py::test_a_partition_s_store_is_rebuilt_from_its_changelog_while_the_app_runs",
        ),
    ),
    Mutation(
        "state: a rebuild asked is never taken by the partition's job",
        "conveyor/processing/partition_core.py",
        (("            self.stores.rebuild(names)\n", "            pass\n"),),
        (
            "tests/integration/state/test_stores.py::test_a_partition_s_store_is_rebuilt_from_its_changelog_while_the_app_runs",
        ),
    ),
    Mutation(
        "state: session windows a message bridges are not merged",
        "conveyor/state/windows.py",
        (
            (
                "        touching = [(s, e) for s, e in sessions if s - gap <= timestamp <= e + gap]",
                "        touching = [(s, e) for s, e in sessions if s <= timestamp <= e]",
            ),
        ),
        ("tests/unit/state/test_windows.py::test_sessions_grow_merge_and_close_after_their_gap",),
    ),
    Mutation(
        "state: a local store ahead of its (recreated) changelog opened as if it fit",
        "conveyor/state/partition_stores.py",
        (("            if start > high:", "            if False:"),),
        (
            "tests/integration/state/test_stores.py::test_a_changelog_recreated_under_a_warm_store_stops_its_partition_or_rebuilds_it",
        ),
    ),
    Mutation(
        "state: a batch's local writes skip the write-ahead log (a killed process loses them)",
        "conveyor/state/partition_stores.py",
        (
            (
                "            self._held[name][1].write(changes, meta)",
                "            self._held[name][1].write(changes, meta, wal=False)",
            ),
        ),
        (
            "tests/unit/state/test_store.py::test_a_flushed_batch_s_local_writes_survive_a_sigkill",
            "tests/integration/state/test_exactly_once_state.py::test_at_least_once_no_update_is_lost_through_sigkills_and_a_warm_store_replays_little",
        ),
    ),
    Mutation(
        "queries: a key whose partition is elsewhere is not asked of its owner",
        "conveyor/state/queries.py",
        (
            (
                "            raw = self._ask(route, partition, store, key, timeout)",
                "            raw = None",
            ),
        ),
        ("tests/integration/state/test_queries.py::test_a_key_is_read_where_its_partition_is",),
    ),
    Mutation(
        "tables: a partition's table is not read before its first batch",
        "conveyor/state/partition_stores.py",
        (
            (
                "                if store.changelog:\n                    try:",
                "                if store.changelog and store.source is None:\n                    try:",
            ),
        ),
        (
            "tests/integration/state/test_tables.py::test_lookups_see_the_whole_table_from_the_first_batch_and_its_changes_after",
        ),
    ),
    Mutation(
        "tables: a table stops following its topic after its first read",
        "conveyor/state/tables.py",
        (
            (
                "                        target.write(target.backend, changes, end)",
                "                        pass",
            ),
        ),
        (
            "tests/integration/state/test_tables.py::test_lookups_see_the_whole_table_from_the_first_batch_and_its_changes_after",
        ),
    ),
    Mutation(
        "tables: a table partitioned otherwise than its stream is not refused",
        "conveyor/state/changelogs.py",
        (
            (
                "    routes = list(routes)\n    check_co_partitioned(routes, counts)",
                "    routes = list(routes)",
            ),
        ),
        (
            "tests/integration/state/test_tables.py::test_a_table_partitioned_otherwise_than_its_stream_stops_the_app_at_start",
        ),
    ),
    Mutation(
        "state: a sliding window forgets the window left as a message drops out",
        "conveyor/state/windows.py",
        (
            (
                "            if later < len(times) and times[later] <= moment + size + 1:",
                "            if False:",
            ),
        ),
        (
            "tests/unit/state/test_windows.py::test_sliding_windows_are_kafka_streams_five_windows_of_its_example",
        ),
    ),
    Mutation(
        "transactions: an aborted joint transaction leaves the other partitions where they are",
        "conveyor/processing/joint_transaction.py",
        (
            (
                "            for member in staying:\n                self._rewinds[member] = shares[member].first",
                "            for member in ():\n                self._rewinds[member] = shares[member].first",
            ),
        ),
        (
            "tests/unit/processing/test_joint_transaction.py::test_a_failing_block_aborts_and_every_partition_with_earlier_batches_runs_them_again",
            "tests/integration/processing/test_exactly_once.py::test_a_failure_inside_the_transaction_aborts_it_and_the_retry_commits_once",
        ),
    ),
    Mutation(
        "transactions: a failed partition's retry joins the others' open transaction",
        "conveyor/processing/joint_transaction.py",
        (
            (
                "                if key in self._solo and any(other is not member for other in self._shares):",
                "                if False:",
            ),
        ),
        (
            "tests/unit/processing/test_joint_transaction.py::test_a_partition_that_failed_commits_alone_until_past_the_batch_that_failed",
        ),
    ),
    Mutation(
        "transactions: a revocation leaves the joint transaction open (it aborts later)",
        "conveyor/processing/executor.py",
        (("            self.joint_seat.settle()", "            pass"),),
        (
            "tests/integration/processing/test_exactly_once.py::test_a_rebalance_under_a_transaction_interval_commits_and_copies_nothing_twice",
        ),
    ),
    Mutation(
        "transactions: a batch in the joint transaction marked at its end, before the commit",
        "conveyor/processing/executor.py",
        (
            (
                "        deferred = self.handed_to_joint()  # its commit writes them and marks",
                "        deferred = False",
            ),
        ),
        (
            "tests/integration/state/test_stores.py::test_an_aborted_joint_transaction_leaves_the_store_as_its_last_commit_left_it",
            "tests/integration/state/test_exactly_once_state.py::test_counts_are_exact_through_repeated_sigkills_under_exactly_once",
        ),
    ),
    Mutation(
        "connect: a source's poll and its offsets written without a transaction",
        "conveyor/connect/runtime/worker.py",
        (
            (
                '        exactly_once = config["exactly.once.support"] != "none"',
                "        exactly_once = False",
            ),
        ),
        (
            "tests/integration/connect/test_connect_sources.py::test_a_poll_that_fails_midway_writes_none_of_its_records_and_is_read_again",
        ),
    ),
    Mutation(
        "connect: a source task starts from no offsets, not the committed ones",
        "conveyor/connect/runtime/sources.py",
        (("        self._task.start(offsets)", "        self._task.start(SourceOffsets())"),),
        (
            "tests/integration/connect/test_connect_sources.py::test_a_file_source_writes_each_line_once_through_a_restart",
        ),
    ),
    Mutation(
        "connect: a paused connector's tasks keep running",
        "conveyor/connect/runtime/worker.py",
        (
            (
                '                    if target == "STARTED":',
                '                    if target != "STOPPED":',
            ),
        ),
        (
            "tests/integration/connect/test_connect_rest.py::test_a_kafka_connect_client_runs_a_conveyor_connector_through_its_life",
        ),
    ),
    Mutation(
        "connect: a deleted connector's tasks keep running",
        "conveyor/connect/runtime/worker.py",
        (
            (
                "            elif key not in wanted or wanted[key].config != running.config:",
                "            elif key in wanted and wanted[key].config != running.config:",
            ),
        ),
        (
            "tests/integration/connect/test_connect_rest.py::test_a_kafka_connect_client_runs_a_conveyor_connector_through_its_life",
        ),
    ),
    Mutation(
        "connect: a reconfigured failed task is not tried again",
        "conveyor/connect/runtime/worker.py",
        (
            (
                "                del self._failed[key]  # reconfigured: tried again",
                "                pass",
            ),
        ),
        (
            "tests/integration/connect/test_connect_rest.py::test_a_failing_task_shows_its_trace_and_runs_once_reconfigured",
        ),
    ),
    Mutation(
        "connect: a killed worker's slots are not handed to the others",
        "conveyor/connect/runtime/membership.py",
        (
            (
                "            self._held.difference_update(partition for _, partition in partitions)",
                "            pass",
            ),
            (
                "            self._held.update(partition for _, partition in partitions)",
                "            self._held.update(partition for _, partition in partitions if not self._held)",
            ),
        ),
        (
            "tests/integration/connect/test_connect_sources.py::test_a_killed_worker_s_source_task_moves_to_the_other_with_each_line_once",
        ),
    ),
    Mutation(
        "connect: a restarted CDC task streams from its slot, not its committed offset",
        "conveyor/connect/sources/postgres.py",
        (
            (
                "                    if message.end_lsn > self._lsn:  # else: written before a restart",
                "                    if True:",
            ),
            (
                "            stream = self._stream = Stream(self.url, self.slot, self.publication, self._lsn)",
                "            stream = self._stream = Stream(self.url, self.slot, self.publication, 0)",
            ),
        ),
        (
            "tests/integration/connect/test_postgres_cdc.py::test_a_task_restarted_ahead_of_its_slot_skips_what_kafka_has_already",
        ),
    ),
    Mutation(
        "connect: a CDC delete is followed by no tombstone",
        "conveyor/connect/sources/postgres.py",
        (("        if self.tombstones and key is not None:", "        if False:"),),
        (
            "tests/integration/connect/test_postgres_cdc.py::test_cdc_snapshots_then_streams_each_change_once_in_commit_order",
        ),
    ),
    Mutation(
        "connect: a resumed CDC snapshot's stream writes changes its rows already hold",
        "conveyor/connect/sources/postgres.py",
        (
            (
                "        return segments.newer((relation.schema, relation.table, placed), commit_lsn)",
                "        return True",
            ),
        ),
        (
            "tests/integration/connect/test_postgres_cdc.py::test_a_snapshot_cut_short_resumes_after_its_last_row_with_each_change_once",
            "tests/integration/connect/test_postgres_cdc_faults.py::test_a_snapshot_whose_worker_is_killed_midway_is_finished_by_another_exactly_once",
        ),
    ),
    Mutation(
        "connect: a CDC snapshot cut short begins again",
        "conveyor/connect/sources/postgres.py",
        (
            (
                "            if self._slot_exists():\n                self._resume_snapshot",
                "            if False:\n                self._resume_snapshot",
            ),
        ),
        (
            "tests/integration/connect/test_postgres_cdc.py::test_a_snapshot_cut_short_resumes_after_its_last_row_with_each_change_once",
            "tests/integration/connect/test_postgres_cdc_faults.py::test_a_snapshot_whose_worker_is_killed_midway_is_finished_by_another_exactly_once",
        ),
    ),
    Mutation(
        "connect: a REPLICA IDENTITY FULL table's CDC key holds every column",
        "conveyor/connect/sources/postgres.py",
        (
            (
                '            if relation.replica_identity == "d"  # the flags name',
                "            if True  # the flags name",
            ),
        ),
        (
            "tests/integration/connect/test_postgres_cdc.py::test_cdc_snapshots_then_streams_each_change_once_in_commit_order",
        ),
    ),
    Mutation(
        "connect: a CDC task without a snapshot that wrote nothing makes its slot again",
        "conveyor/connect/sources/postgres.py",
        (("        elif not self.snapshot and self._slot_exists():", "        elif False:"),),
        (
            "tests/integration/connect/test_postgres_cdc.py::test_a_task_without_a_snapshot_that_wrote_nothing_keeps_its_slots_changes",
        ),
    ),
    Mutation(
        "connect: the UI's /connect API skips the UI's rules",
        "conveyor/web/connect_api.py",
        (("create_rest_app(self._cluster(), _ui_gate)", "create_rest_app(self._cluster())"),),
        (
            "tests/integration/web/test_connect_api.py::test_the_uis_rules_apply_to_each_connect_call",
        ),
    ),
    Mutation(
        "connect: a worker's password is not asked",
        "conveyor/cli/connect.py",
        (("    gate = _rest_gate(user, host, say)\n", "    gate = None\n"),),
        (
            "tests/integration/web/test_connect_api.py::test_the_ui_serves_the_connect_api_to_a_connect_client_and_a_worker_asks_a_password",
        ),
    ),
    Mutation(
        "web: a client signed in by its Authorization header still needs a CSRF token",
        "conveyor/web/ui/guard.py",
        (("        if not request.state.by_header:", "        if True:"),),
        (
            "tests/unit/web/test_access.py::test_a_rest_client_signs_in_with_each_call_and_needs_no_csrf_token",
        ),
    ),
    Mutation(
        "connect: a body that does not say it is JSON is read",
        "conveyor/connect/runtime/rest.py",
        (('    if raw and media != "application/json":', "    if False:"),),
        (
            "tests/integration/web/test_connect_api.py::test_the_uis_rules_apply_to_each_connect_call",
        ),
    ),
)


def apply(mutation: Mutation, scratch: Path) -> bool:
    """Patch the scratch copy; False when a patch no longer applies, or leaves code that does
    not compile (its tests would fail for the wrong reason: an import error, not the feature).
    A template or stylesheet of the package is patched as text."""
    target = scratch / mutation.path
    text = target.read_text()
    for old, new in mutation.patches:
        if text.count(old) != 1:
            return False
        text = text.replace(old, new)
    try:
        if target.suffix == ".py":
            compile(text, str(target), "exec")
    except SyntaxError:
        return False
    target.write_text(text)
    return True


def run_tests(
    tests: tuple[str, ...],
    scratch: Path,
    timeout: float,
    verbose: bool = False,
    options: tuple[str, ...] = (),
) -> tuple[bool, str, float]:
    """Run ``tests`` against the scratch copy: (passed, the first failure's line, seconds)."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, (str(scratch), os.environ.get("PYTHONPATH")))),
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-x",
        "-p",
        "no:cacheprovider",
        *options,
        *tests,
    ]
    started = time.monotonic()
    try:
        result = subprocess.run(
            command,
            check=False,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False, "timed out", time.monotonic() - started
    why = next(
        (line[1:].strip() for line in result.stdout.splitlines() if line.startswith("E ")), ""
    )
    if verbose and result.returncode:
        sys.stderr.write(result.stdout[-4000:])
    return result.returncode == 0, why, time.monotonic() - started


def scratch_copy(directory: str) -> Path:
    scratch = Path(directory)
    shutil.copytree(ROOT / "src" / "conveyor", scratch / "conveyor")
    check_scratch_is_used(scratch)
    return scratch


def check_scratch_is_used(scratch: Path) -> None:
    """The scratch copy must shadow the installed package, or nothing here means anything."""
    env = dict(os.environ, PYTHONPATH=str(scratch))
    where = subprocess.run(
        [sys.executable, "-c", "import conveyor; print(conveyor.__file__)"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not where.startswith(str(scratch)):
        raise SystemExit(f"the scratch copy is not imported (conveyor comes from {where})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "names", nargs="*", help="run only mutations whose name contains one of these"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutation")
    parser.add_argument(
        "--jobs", type=int, default=1, help="mutants tested at once (each in its own copy)"
    )
    parser.add_argument("--verbose", action="store_true", help="print the output of failed runs")
    args = parser.parse_args()
    if not os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        raise SystemExit("set KAFKA_BOOTSTRAP_SERVERS (e.g. after `conveyor broker start`)")
    chosen = [m for m in MUTATIONS if not args.names or any(n in m.name for n in args.names)]
    console = Console()
    with console.status("") as status:
        # The control: unmutated, the same tests pass (else "killed" would mean nothing).
        status.update("control run: the guarding tests on an unmutated copy")
        with tempfile.TemporaryDirectory(prefix="conveyor-control-") as directory:
            tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
            workers = ("-n", str(max(2, args.jobs)), "--dist", "loadgroup")  # as make test
            passed, why, elapsed = run_tests(
                tests, scratch_copy(directory), args.timeout * 4, args.verbose, workers
            )
        if not passed:
            raise SystemExit(f"the guarding tests fail without any mutation: {why}")
        console.print(f"  control: the guarding tests pass unmutated ({elapsed:.0f} s)")
        finished = itertools.count(1)  # next() is atomic: the pool's threads share it

        def test(mutation: Mutation) -> tuple[str, str, float]:
            with tempfile.TemporaryDirectory(prefix="conveyor-mutant-") as directory:
                scratch = scratch_copy(directory)
                if not apply(mutation, scratch):
                    result, why, elapsed = "stale", "the patch no longer applies", 0.0
                else:
                    passed, why, elapsed = run_tests(
                        mutation.tests, scratch, args.timeout, args.verbose
                    )
                    result = "survived" if passed else "killed"
            done = next(finished)
            console.print(f"  [{done}/{len(chosen)}] {mutation.name}: {result} ({elapsed:.0f} s)")
            status.update(f"{done} of {len(chosen)} mutants tested")
            return result, why, elapsed

        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            results = list(pool.map(test, chosen))  # in the table's order
    table = Table(title="mutations: features switched off one at a time")
    for column in ("feature switched off", "result", "seconds", "tests", "why it failed"):
        table.add_column(column)
    for mutation, (result, why, elapsed) in zip(chosen, results, strict=True):
        table.add_row(
            mutation.name, result, f"{elapsed:.0f}",
            "\n".join(t.split("::")[-1] for t in mutation.tests), why[:80],
        )  # fmt: skip
    console.print(table)
    counts = {
        kind: [r for r, _, _ in results].count(kind) for kind in ("killed", "survived", "stale")
    }
    console.print(", ".join(f"{count} {kind}" for kind, count in counts.items()))
    return 1 if counts["survived"] or counts["stale"] else 0


if __name__ == "__main__":
    sys.exit(main())
