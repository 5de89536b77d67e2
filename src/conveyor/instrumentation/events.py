"""Every event name Conveyor emits on a monitor, in one place (``noun.verb_past``).

Payload keys are listed beside each; every event also carries ``time`` (a
``time.monotonic()`` reading taken when it was emitted).
"""

from __future__ import annotations

__all__ = [
    "APP_QUIETING",
    "APP_RUNNING",
    "APP_STOPPED",
    "APP_STOPPING",
    "CONNECTION_LISTENER_FETCH_LOOP",
    "CONNECTION_LOST",
    "CONNECTION_RESTORED",
    "CONSUMER_CONSUME",
    "CONSUMER_CONSUMED",
    "CONSUMER_EOFED",
    "CONSUMER_REVOKED",
    "CONSUMER_SHUTDOWN",
    "CONSUMER_TICKED",
    "DEAD_LETTER_QUEUE_DISPATCHED",
    "DEAD_LETTER_QUEUE_SKIPPED",
    "ERROR_OCCURRED",
    "EVENTS",
    "EVENT_LOOP_BLOCKED",
    "JOB_DIED",
    "JOB_PERFORMED",
    "JOB_RETRIED",
    "LATENCY_MEASURED",
    "MESSAGES_POLLED",
    "MESSAGES_PRODUCED_ASYNC",
    "MESSAGES_PRODUCED_SYNC",
    "MESSAGE_ACKNOWLEDGED",
    "MESSAGE_PRODUCED_ASYNC",
    "MESSAGE_PRODUCED_SYNC",
    "MESSAGE_PURGED",
    "OFFSETS_COMMITTED",
    "OFFSETS_COMMIT_REFUSED",
    "PRODUCER_CLOSED",
    "PRODUCER_RELOADED",
    "REBALANCE_PARTITIONS_ASSIGNED",
    "REBALANCE_PARTITIONS_REVOKED",
    "STATE_RESTORED",
    "STATE_RESTORING",
    "STATISTICS_EMITTED",
    "TRANSACTION_ABORTED",
    "TRANSACTION_COMMITTED",
    "TRANSACTION_STARTED",
    "VIRTUAL_PARTITIONS_COLLAPSED",
    "VIRTUAL_PARTITIONS_DISTRIBUTED",
    "VIRTUAL_PARTITIONS_RESTORED",
]

MESSAGE_PRODUCED_ASYNC = "message.produced_async"
"""A message was handed to librdkafka: ``producer_id``, ``message`` (dict), ``label``."""
MESSAGE_PRODUCED_SYNC = "message.produced_sync"
"""A message was delivered by ``produce_sync``: ``producer_id``, ``message``, ``report``, ``duration`` (s)."""
MESSAGES_PRODUCED_ASYNC = "messages.produced_async"
"""A burst was handed to librdkafka: ``producer_id``, ``count``, ``duration`` (s)."""
MESSAGES_PRODUCED_SYNC = "messages.produced_sync"
"""A burst was delivered by ``produce_many_sync``: ``producer_id``, ``count``, ``duration`` (s)."""
MESSAGE_ACKNOWLEDGED = "message.acknowledged"
"""The broker acknowledged a message: ``producer_id``, ``topic``, ``partition``, ``offset``, ``label``."""
MESSAGE_PURGED = "message.purged"
"""A message was purged before delivery (abort, close): ``producer_id``, ``topic``, ``error``, ``label``."""
TRANSACTION_STARTED = "transaction.started"
"""``producer_id``."""
TRANSACTION_COMMITTED = "transaction.committed"
"""``producer_id``, ``duration`` (s)."""
TRANSACTION_ABORTED = "transaction.aborted"
"""``producer_id``, ``duration`` (s), ``error`` (the exception that aborted it)."""
PRODUCER_CLOSED = "producer.closed"
"""``producer_id``, ``undelivered`` (messages purged at close)."""
PRODUCER_RELOADED = "producer.reloaded"
"""The producer rebuilt its client after a fatal error: ``producer_id``, ``attempt``, ``error``."""
JOB_PERFORMED = "job.performed"
"""A background job ran to its end: ``topic`` (its queue's), ``partition``, ``job``, ``id``,
``attempt``, ``duration`` (s)."""
JOB_RETRIED = "job.retried"
"""A job failed and was sent again for later: ``topic``, ``partition``, ``job``, ``id``,
``attempt`` (the next one), ``delay`` (s), ``error``."""
JOB_DIED = "job.died"
"""A job went to its queue's dead-job topic: ``topic``, ``partition``, ``job``, ``id``,
``attempts``, ``error``."""
STATISTICS_EMITTED = "statistics.emitted"
"""librdkafka's statistics (``statistics.interval.ms``): ``statistics`` (parsed JSON), and
``producer_id`` (from a producer) or ``listener`` (from a listener's consumer)."""
ERROR_OCCURRED = "error.occurred"
"""Something failed: ``type`` (e.g. ``librdkafka.error``, ``producer.delivery.error``,
``monitor.listener.error``), ``error`` (the exception), and the context of the failure."""

CONNECTION_LOST = "connection.lost"
"""A client cannot reach the brokers: ``client``, ``error``, ``reminder`` (False for the first
word of an outage, True for the reminders every 30 s while it lasts), ``down_for`` (s),
``errors`` (failed attempts so far)."""
CONNECTION_RESTORED = "connection.restored"
"""A client that had lost its connection reached the brokers again: ``client``, ``down_for``
(s), ``errors``."""
CONNECTION_LISTENER_FETCH_LOOP = "connection.listener.fetch_loop"
"""A listener is about to poll: ``listener``."""
MESSAGES_POLLED = "messages.polled"
"""A listener fetched messages: ``listener``, ``count``."""
CONSUMER_CONSUME = "consumer.consume"
"""A batch is handed to ``consume()``: ``consumer``, ``topic``, ``partition``, ``count`` (and
``virtual_partition``, the lane, on a route with virtual partitions)."""
CONSUMER_CONSUMED = "consumer.consumed"
"""``consume()`` returned: ``consumer``, ``topic``, ``partition``, ``count``, ``first_offset``,
``last_offset``, ``duration`` (s) (and ``virtual_partition``, as above)."""
CONSUMER_REVOKED = "consumer.revoked"
"""``revoked()`` ran: ``consumer``, ``topic``, ``partition``, ``duration``."""
CONSUMER_SHUTDOWN = "consumer.shutdown"
"""``shutdown()`` ran: ``consumer``, ``topic``, ``partition``, ``duration``."""
CONSUMER_TICKED = "consumer.ticked"
"""``tick()`` ran: ``consumer``, ``topic``, ``partition``, ``duration``."""
CONSUMER_EOFED = "consumer.eofed"
"""``reached_end()`` (Karafka's ``eofed()``) ran: ``consumer``, ``topic``, ``partition``,
``duration``."""
OFFSETS_COMMITTED = "offsets.committed"
"""A listener committed offsets: ``listener``, ``group``, ``offsets`` (list of (topic, partition,
next offset)), ``sync`` (bool; an asynchronous commit is reported when it was sent),
``duration`` (s), ``committed_at`` (wall-clock seconds)."""
OFFSETS_COMMIT_REFUSED = "offsets.commit_refused"
"""The group refused a listener's commit (a rebalance under way, a member it does not know, a
stale generation, partitions no longer assigned): ``listener``, ``group``, ``offsets`` (list of
(topic, partition, next offset) not committed), ``sync`` (bool), ``error`` (a
:class:`~conveyor.errors.KafkaError` whose ``name`` is librdkafka's: ``UNKNOWN_MEMBER_ID``,
``ILLEGAL_GENERATION``, ``REBALANCE_IN_PROGRESS`` ...). Logged at WARNING too."""
EVENT_LOOP_BLOCKED = "event_loop.blocked"
"""One callback held the app's event loop (where async lanes run together) longer than the
app's ``event_loop_blocked_after``: ``task`` (the lane: ``topic/partition lane N``),
``seconds`` (held so far); once per stall."""
LATENCY_MEASURED = "latency.measured"
"""A batch's stage latencies, with ``app.latency`` enabled: ``topic``, ``partition``, ``count``,
``stages`` (stage name -> mean seconds over the batch; see :mod:`conveyor.tracing.latency`)."""
REBALANCE_PARTITIONS_ASSIGNED = "rebalance.partitions_assigned"
"""``listener``, ``group`` (its consumer group), ``partitions`` (list of (topic, partition))."""
REBALANCE_PARTITIONS_REVOKED = "rebalance.partitions_revoked"
"""``listener``, ``group``, ``partitions``."""
DEAD_LETTER_QUEUE_DISPATCHED = "dead_letter_queue.dispatched"
"""A message was moved to its DLQ: ``topic``, ``partition``, ``offset``, ``dlq_topic``, ``attempts``, ``error``."""
DEAD_LETTER_QUEUE_SKIPPED = "dead_letter_queue.skipped"
"""A message was skipped after its retries (``"topic": False``): ``topic``, ``partition``, ``offset``,
``attempts``, ``error``."""
VIRTUAL_PARTITIONS_DISTRIBUTED = "virtual_partitions.distributed"
"""Messages of a partition were handed to its lanes: ``topic``, ``partition``, ``sizes`` (list:
messages handed to each lane this time), ``lanes`` (their count)."""
VIRTUAL_PARTITIONS_COLLAPSED = "virtual_partitions.collapsed"
"""After a failure a partition runs in one lane, in strict order: ``topic``, ``partition``,
``until`` (the last offset run collapsed), ``error``."""
VIRTUAL_PARTITIONS_RESTORED = "virtual_partitions.restored"
"""A collapsed partition passed ``until`` and runs in its lanes again: ``topic``, ``partition``,
``until``."""
FILTER_DROPPED = "filter.dropped"
"""A route's filter dropped messages before ``consume()`` (marked as consumed): ``filter``,
``reason`` (``expired``, ``dropped`` or the filter's own), ``topic``, ``partition``, ``count``,
``first_offset``, ``last_offset``."""
FILTER_PAUSED = "filter.paused"
"""A route's filter made a partition wait: ``filter``, ``reason`` (``throttled``,
``delayed`` or the filter's own), ``topic``, ``partition``, ``offset`` (the first that
waits), ``count`` (how many wait), ``seconds``."""
SCHEDULE_DISPATCHED = "schedule.dispatched"
"""A scheduled message was sent to its topic: ``id``, ``topic``, ``late`` (seconds after its
time)."""
RECURRING_RAN = "recurring.ran"
"""A recurring task ran: ``task``, ``slot`` (the scheduled time, epoch seconds), ``late``
(seconds after the slot it started), ``duration``."""
RPC_CALL_SENT = "rpc.call.sent"
"""An RPC client sent a call (or a retry of it): ``id``, ``command``, ``attempt`` (1, 2, ...)."""
RPC_CALL_REPLIED = "rpc.call.replied"
"""A call's reply came: ``id``, ``command``, ``ok`` (False: an error reply), ``duration``."""
RPC_CALL_TIMED_OUT = "rpc.call.timed_out"
"""A call got no reply in time (after its retries): ``id``, ``command``, ``attempts``."""
RPC_REPLY_DISCARDED = "rpc.reply.discarded"
"""A reply came for no pending call (late, a duplicate, or another client's): ``id``."""
RPC_REQUEST_HANDLED = "rpc.request.handled"
"""A server ran a handler: ``topic``, ``id``, ``command``, ``ok``, ``error_type``,
``duration``."""
RPC_REQUEST_DUPLICATE = "rpc.request.duplicate"
"""A server answered a request id again from its reply cache: ``topic``, ``id``,
``command``."""
RPC_REQUEST_EXPIRED = "rpc.request.expired"
"""A server skipped a request whose caller's deadline had passed: ``topic``, ``id``,
``command``."""
RPC_REQUEST_REFUSED = "rpc.request.refused"
"""A server's ``authorize`` refused a request: ``topic``, ``id``, ``command``."""
RPC_REQUEST_MALFORMED = "rpc.request.malformed"
"""A message on a commands topic was not a request: ``topic``, ``error``."""
STATE_RESTORING = "state.restoring"
"""A store's restore wrote a batch of its changelog (its progress, kept if the partition goes
now): ``topic``, ``partition``, ``store``, ``records`` and ``bytes`` so far, ``offset`` (the
changelog offset reached) and ``end`` (the changelog's end when the restore began)."""
STATE_RESTORED = "state.restored"
"""A partition's store was opened and caught up with its changelog before its first batch:
``topic``, ``partition``, ``store``, ``records`` and ``bytes`` replayed (0 for a warm store
that was up to date), ``seconds``, ``start`` and ``end`` (the changelog offsets read)."""
APP_RUNNING = "app.running"
"""The app started consuming: ``app``."""
APP_QUIETING = "app.quieting"
"""The app stopped taking new batches (quiet): ``app``."""
APP_STOPPING = "app.stopping"
"""A graceful stop began: ``app``."""
APP_STOPPED = "app.stopped"
"""The app stopped: ``app``, ``clean`` (bool)."""

EVENTS = frozenset(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
)
"""All event names above."""
