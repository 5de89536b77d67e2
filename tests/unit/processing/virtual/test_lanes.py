"""Which lane a message goes to."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conveyor.messages import Deserializers
from conveyor.processing.virtual import LaneAssigner, stable_hash
from conveyor.routing.virtual_partitions import VirtualPartitions
from unit.processing.fakes import FakeRaw


def test_the_default_is_a_stable_hash_of_the_key() -> None:
    assigner = LaneAssigner(VirtualPartitions(), 16, Deserializers())
    lanes = {assigner.lane_of(FakeRaw(0, key=f"k{i}".encode())) for i in range(200)}
    assert lanes == set(range(16)), "200 keys reach every one of 16 lanes"
    same = [assigner.lane_of(FakeRaw(offset, key=b"k7")) for offset in range(5)]
    assert len(set(same)) == 1
    assert assigner.lane_of(FakeRaw(0, key=None)) == 0, "keyless messages share one lane"


# Keys a partitioner may return, as Python source (evaluated here and in another process).
_KEYS = (
    "b'order-42'", "'order-42'", "42", "True", "('eu', 'order-42', 7)", "(('a', b'b'), 1.5)",
    "uuid.UUID('12345678-1234-5678-1234-567812345678')", "3.25", "4.0",
    "decimal.Decimal('1.10')", "datetime.date(2026, 1, 2)",
    "datetime.datetime(2026, 1, 2, 3, 4, 5)", "Colour.RED",
)  # fmt: skip
_SETUP = (
    "import datetime, decimal, enum, uuid\n"
    "class Colour(enum.Enum):\n    RED = 'red'\n"
    "from conveyor.processing.virtual import stable_hash\n"
)


def test_the_hash_is_the_same_in_another_process() -> None:
    """hash() of bytes and str is salted per process; the lanes of every usual key type must
    not depend on it: bytes, str, ints, tuples of them, UUIDs, floats, decimals, dates, enums."""
    namespace: dict[str, object] = {}
    exec(_SETUP, namespace)
    here = [str(namespace["stable_hash"](eval(key, namespace))) for key in _KEYS]  # type: ignore[operator]
    code = _SETUP + f"for key in {list(_KEYS)!r}:\n    print(stable_hash(eval(key)))\n"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.split() == here
    assert stable_hash(("eu", "order-42")) != stable_hash(("order-42", "eu")), "order counts"
    assert stable_hash(4.0) == stable_hash(4), "equal keys share a lane"


def test_a_partitioner_and_a_reducer() -> None:
    settings = VirtualPartitions(
        partitioner=lambda message: message.payload["user"], reducer=lambda key: key * 10
    )
    assigner = LaneAssigner(settings, 4, Deserializers())
    raw = FakeRaw(0, value=b'{"user": 3}')
    assert assigner.lane_of(raw) == 30 % 4


def test_a_reducer_that_returns_no_int_is_an_error() -> None:
    assigner = LaneAssigner(VirtualPartitions(reducer=lambda key: "x"), 4, Deserializers())
    with pytest.raises(TypeError, match="reducer returned 'x'"):
        assigner.lane_of(FakeRaw(0, key=b"a"))
