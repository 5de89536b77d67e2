"""`conveyor dlq replay` moves dead letters back to their original topic and reports counts;
a second replay moves only what arrived since."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from conveyor import Admin, Producer
from conveyor.cli.main import cli


def test_replay_moves_messages_back(
    kafka_bootstrap: str,
    new_topic,
    read_messages,
    kafka_admin: Admin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    orders = new_topic(partitions=2)
    dlq = new_topic()
    module = f"replaying_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "from conveyor import App\n"
        f"app = App(client_id={module!r}, kafka={{'bootstrap.servers': {kafka_bootstrap!r}}})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    dead = [
        {"topic": dlq, "payload": json.dumps({"n": n}).encode(), "key": f"k{n}",
         "headers": [("trace", f"t{n}"), ("original_topic", orders), ("original_offset", str(n))]}
        for n in range(3)
    ]  # fmt: skip
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(dead)

    result = CliRunner().invoke(cli, ["dlq", "replay", "--app", f"{module}:app", "--topic", dlq])
    assert result.exit_code == 0, result.output
    assert "3 message(s)" in result.output
    assert orders in result.output
    replayed = read_messages(orders, 3)
    assert sorted(m.key() for m in replayed) == [b"k0", b"k1", b"k2"]
    assert all(dict(m.headers()).keys() == {"trace"} for m in replayed), (
        "original_* headers dropped"
    )

    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_sync(**{**dead[0], "key": "late"})
    again = CliRunner().invoke(cli, ["dlq", "replay", "--app", f"{module}:app", "--topic", dlq])
    assert again.exit_code == 0, again.output
    assert "1 message(s)" in again.output
    total = sum(kafka_admin.read_watermark_offsets(orders, p)[1] for p in (0, 1))
    assert total == 4, "the second replay moved only the new message"

    # chosen dead letters only (the web UI's redrive): offsets 0 and 2, one that is not there
    chosen = CliRunner().invoke(
        cli, ["dlq", "replay", "--app", f"{module}:app", "--topic", dlq,
              "--offset", "0:0", "--offset", "0:2", "--offset", "0:99"],
    )  # fmt: skip
    assert chosen.exit_code == 1, chosen.output
    assert "2 message(s)" in chosen.output
    assert "not found" in chosen.output
    assert "0:99" in chosen.output
    moved = sorted(m.key() for m in read_messages(orders, 6))
    assert moved == sorted([b"k0", b"k1", b"k2", b"late", b"k0", b"k2"])
    bad = CliRunner().invoke(
        cli, ["dlq", "replay", "--app", f"{module}:app", "--topic", dlq, "--offset", "zero"]
    )
    assert bad.exit_code == 2
    assert "partition:offset" in bad.output
    for name in [m for m in sys.modules if m.startswith("replaying_")]:
        del sys.modules[name]
