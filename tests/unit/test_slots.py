"""A process's slot on its host: unique among the live processes of one name, the same again
for the process that replaces a killed one, and a forked child's own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from conveyor.slots import previous_use, record_use, slot

_HOLDER = """
import sys
from pathlib import Path
from conveyor.slots import previous_use, record_use, slot
name, folder = sys.argv[1], Path(sys.argv[2])
print(slot(name, folder), previous_use(name, folder) or "-", flush=True)
record_use(name, "transactional", folder)
sys.stdin.read()  # hold the slot until the test closes stdin (or kills this process)
"""


class Holder:
    """A process that takes a slot and holds it until it ends."""

    def __init__(self, name: str, folder: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, name, str(folder)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        number, self.previous = self.process.stdout.readline().split()
        self.slot = int(number)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._close()

    def end(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(10)
        self._close()

    def _close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                stream.close()


def test_live_processes_hold_distinct_slots_and_a_replacement_takes_the_killed_one(
    tmp_path: Path,
) -> None:
    first, second = Holder("app", tmp_path), Holder("app", tmp_path)
    other_app = Holder("other", tmp_path)
    try:
        assert (first.slot, second.slot, other_app.slot) == (0, 1, 0)
        first.kill()  # a crash: no clean-up ran, the operating system freed the lock
        replacement = Holder("app", tmp_path)
        assert replacement.slot == 0
        assert first.previous == "-"
        assert replacement.previous == "transactional", "what its predecessor recorded"
        replacement.end()
    finally:
        for holder in (first, second, other_app):
            if holder.process.poll() is None:
                holder.end()


def test_a_process_keeps_its_slot_and_a_forked_child_takes_its_own(tmp_path: Path) -> None:
    mine = slot("app", tmp_path)
    assert slot("app", tmp_path) == mine
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report its slot, then leave without running pytest's exit
        os.write(write, str(slot("app", tmp_path)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        assert int(answer.read()) != mine
    os.waitpid(child, 0)


def test_what_a_process_records_is_read_by_the_next_one_in_its_slot(tmp_path: Path) -> None:
    assert previous_use("mine", tmp_path) == ""
    record_use("mine", "transactional", tmp_path)
    assert (tmp_path / f"mine.{slot('mine', tmp_path)}.lock").read_text() == "transactional"
