"""Signed commands against a running app with a commands key: an unsigned stop, a request
signed with another key and a replayed copy of a signed one are refused (and counted), the
app goes on running, and a request signed with the app's key is carried out; an issuer with
the key hears only answers signed with it."""

from __future__ import annotations

import time
import uuid

import pytest

from conveyor import App, Consumer, Producer
from conveyor.web import WebTopics
from conveyor.web.commands import Commander, encode_signed, read_commands, tail_commands
from conveyor.web.signing import KEY_ENV, CommandSigner
from helpers import running

KEY = b"k" * 32


class Idle(Consumer):
    def consume(self) -> None:
        pass


def test_only_commands_signed_with_the_apps_key_are_carried_out(
    kafka_bootstrap: str, new_topic, web_topics: WebTopics, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY.decode())  # the process's key comes from the environment
    topic = new_topic()
    app = App(client_id="signed", kafka={"bootstrap.servers": kafka_bootstrap,
                                         "group.id": f"signed-{uuid.uuid4().hex[:8]}"})  # fmt: skip
    app.routes.topic(topic, Idle)
    app.web.enable(topics=web_topics, aggregate=False)
    with running(app), Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        handler = app.web.commands
        assert handler is not None
        assert handler.wait_listening(30)
        process = handler.id
        kafka = {"bootstrap.servers": kafka_bootstrap}
        unsigned = Commander(kafka, web_topics, producer)
        stranger = Commander(
            kafka, web_topics, producer, CommandSigner(b"s" * 32, web_topics.commands)
        )
        owner = Commander(kafka, web_topics, producer, CommandSigner(KEY, web_topics.commands))

        refused = unsigned.send("stop", process=process, timeout=15)
        assert refused.status == "refused", refused
        assert refused.reason.startswith("unsigned"), refused.reason
        # signed with another key: refused, and its issuer does not take the app's answer
        assert stranger.send("stop", process=process, timeout=3).status == "timed out"
        assert handler.refused == 2

        # a copy of a signed request, sent again: refused as replayed
        request = {"type": "command", "id": uuid.uuid4().hex, "command": "probe",
                   "process": process, "args": {}, "by": "test", "sent_at": time.time()}  # fmt: skip
        payload, headers = encode_signed(request, CommandSigner(KEY, web_topics.commands))
        reader = tail_commands(kafka, web_topics.commands, "test-replay")
        try:
            for _ in range(2):
                producer.produce_sync(topic=web_topics.commands, payload=payload, headers=headers)
            answers: list[dict[str, object]] = []
            deadline = time.monotonic() + 30
            while len(answers) < 2 and time.monotonic() < deadline:
                answers += [
                    received.message
                    for received in read_commands(reader, 0.5)
                    if received.message.get("type") == "result"
                    and received.message.get("id") == request["id"]
                ]
        finally:
            reader.close()
        assert [answer["status"] for answer in answers] == ["done", "refused"], answers
        assert str(answers[1]["reason"]).startswith("replayed")
        assert handler.refused == 3

        assert app.state == "running", "no refused stop stopped it"
        probed = owner.send("probe", process=process, timeout=15)
        assert probed.done, probed
        assert probed.result["threads"]
        assert app.web.commander().send("probe", process=process, timeout=15).done  # its own
        stopped = owner.send("stop", process=process, timeout=15)
        assert stopped.done, stopped
