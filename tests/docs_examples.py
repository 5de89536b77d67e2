"""Runs the code blocks of one documentation page, as a reader would, against a real broker.

``python tests/docs_examples.py PAGE.md`` runs the page's blocks in order, in one namespace (a
later block may use what an earlier one made, as a reader would type them into one session),
from a scratch folder of their own, and exits non-zero at the first that fails, naming it.
``tests/integration/docs/test_examples.py`` runs every page of ``docs/`` and the README so.

What a block is, is said by an HTML comment on the line before its fence (invisible on the
site and on GitHub):

* a ``python`` block with no comment **runs**; it must not raise;
* ``<!-- example: fragment uses NAME, NAME -->``: an excerpt that cannot run alone. It must
  compile, its imports must resolve, and every name it uses must be defined by it, by an
  earlier block of the page, by Python, or be one of those it lists after ``uses``;
* ``<!-- example: serves -->``: a block whose ``app.run()`` (or ``app.start()``) consumes until
  stopped; the runner stops every app it started after :data:`SERVE_SECONDS` (a graceful stop,
  as Ctrl-C would) and the block must then end without an error;
  ``<!-- example: serves until EXPRESSION -->`` stops them once the expression (in the page's
  namespace) is true instead, or fails the block after :data:`UNTIL_SECONDS` — for a block
  whose effect takes its own time (a delayed job, a schedule), so the check after it does not
  race a fixed window;
* ``<!-- example: file PATH -->``: the block is a file of the example (``shop/app.py``), written
  to PATH in the scratch folder for the blocks after it; ``python``'s files are not run;
* ``<!-- example: run -->`` before a ``sh`` block: its commands run (with ``.venv/bin`` first on
  ``PATH``) and each must exit 0; ``<!-- example: serves -->`` before one: each command runs
  for SHELL_SERVE_SECONDS, gets SIGINT (Ctrl-C) and must then exit 0 without a traceback; other
  shell blocks are shown, not run (``make run``, ``make test`` itself);
* ``<!-- example: skip BECAUSE -->``: not run, for the reason given (shown in the test's output).

``127.0.0.1:9092`` in a block is the broker the tests were given (``KAFKA_BOOTSTRAP_SERVERS``).
"""

from __future__ import annotations

import ast
import builtins
import faulthandler
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from conveyor import App

ROOT = Path(__file__).resolve().parent.parent
SERVE_SECONDS = 3.0
UNTIL_SECONDS = 30.0  # the bound of a ``serves until`` block
UNTIL_CHECK_EVERY = 0.05
HANG_SECONDS = 120.0  # below the test's PAGE_SECONDS (150): stacks are dumped before the kill
SHELL_SERVE_SECONDS = 6.0  # a command starts a new interpreter and joins the group first
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
FENCE = re.compile(r"^```(\w*)")
MARKER = re.compile(r"^<!-- example: (\w+)\s*(.*?)\s*-->$")
KINDS = ("fragment", "serves", "file", "run", "skip")


@dataclass
class Block:
    """One fenced block of a page."""

    language: str
    code: str
    line: int  # of the fence, 1-based
    kind: str = ""  # "" (runs, for python), or one of KINDS
    argument: str = ""

    def where(self, page: str) -> str:
        return f"{page}:{self.line} ({self.language or 'text'} block)"


def blocks_of(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, with the marker before it (if any)."""
    found: list[Block] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        start = index
        index += 1
        body = []
        while index < len(lines) and not lines[index].startswith("```"):
            body.append(lines[index])
            index += 1
        index += 1
        block = Block(fence.group(1), "\n".join(body) + "\n", start + 1)
        marker = MARKER.match(lines[start - 1].strip()) if start else None
        if marker:
            block.kind, block.argument = marker.group(1), marker.group(2)
            if block.kind not in KINDS:
                raise ValueError(
                    f"line {start}: unknown example kind {block.kind!r}; known: {KINDS}"
                )
        found.append(block)
    return found


class ExampleFailed(Exception):
    """A block failed; the message says which and why."""


def _bootstrap(code: str) -> str:
    servers = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", DEFAULT_BOOTSTRAP)
    return code.replace(DEFAULT_BOOTSTRAP, servers)


def check_fragment(block: Block, namespace: dict[str, object], page: str) -> None:
    """Compile it, run its imports, and find every name it uses defined somewhere."""
    try:
        tree = ast.parse(block.code)
    except SyntaxError as error:
        raise ExampleFailed(f"{block.where(page)}: does not compile: {error}") from None
    scratch = dict(namespace)
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            try:
                exec(compile(ast.Module([node], []), block.where(page), "exec"), scratch)
            except Exception as error:
                raise ExampleFailed(
                    f"{block.where(page)}: {ast.unparse(node)}: {error!r}"
                ) from None
    given = {name.strip() for name in re.sub(r"^uses\s+", "", block.argument).split(",")}
    undefined = sorted(_free_names(tree) - set(scratch) - set(dir(builtins)) - given)
    if undefined:
        raise ExampleFailed(
            f"{block.where(page)}: uses {', '.join(undefined)}, defined nowhere before it "
            "(define it, or list it: <!-- example: fragment uses NAME -->)"
        )


def _free_names(tree: ast.AST) -> set[str]:
    """Names read in ``tree`` that nothing in it binds (a rough but strict scope model:
    anything bound anywhere in the block counts as defined)."""
    bound: set[str] = set()
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif (isinstance(node, ast.ExceptHandler) and node.name) or (
            isinstance(node, ast.MatchAs | ast.MatchStar) and node.name
        ):
            bound.add(node.name)
    return used - bound


def run_python(block: Block, namespace: dict[str, object], page: str) -> None:
    code = compile(_bootstrap(block.code), block.where(page), "exec")
    try:
        exec(code, namespace)
    except BaseException as error:
        detail = "".join(traceback.format_exception(error)[-6:])
        raise ExampleFailed(f"{block.where(page)} raised:\n{detail}") from None


def serve_python(block: Block, namespace: dict[str, object], page: str) -> None:
    """Run a block that consumes until stopped: every App it starts is stopped gracefully
    after SERVE_SECONDS (as Ctrl-C would), or once its ``until`` expression holds."""
    until = re.sub(r"^until\s+", "", block.argument) if block.argument.startswith("until") else ""
    started: list[App] = []
    timed_out: list[str] = []
    original_start = App.start

    def stop_when_done(app: App) -> None:
        if not until:
            threading.Timer(SERVE_SECONDS, app.stop).start()
            return
        finished = threading.Event()  # set by nobody: its wait is the bounded pause between checks

        def watch() -> None:
            deadline = time.monotonic() + UNTIL_SECONDS
            try:
                while not eval(until, namespace):  # the page's own expression
                    if time.monotonic() >= deadline:
                        timed_out.append(f"served {UNTIL_SECONDS:g} s and '{until}' never held")
                        break
                    finished.wait(UNTIL_CHECK_EVERY)
            except Exception as error:  # a typo in the marker: said, not a hung page
                timed_out.append(f"'{until}' raised {error!r}")
            finally:
                app.stop()

        threading.Thread(target=watch, name="docs-until", daemon=True).start()

    def start_and_schedule_stop(app: App, **options: object) -> None:
        original_start(app, **options)  # type: ignore[arg-type]
        started.append(app)
        stop_when_done(app)

    App.start = start_and_schedule_stop  # type: ignore[method-assign]
    try:
        run_python(block, namespace, page)
    finally:
        App.start = original_start  # type: ignore[method-assign]
    if not started:
        raise ExampleFailed(f"{block.where(page)}: marked 'serves' but started no App")
    for app in started:
        app.stop_and_wait()
        if app.crash is not None:
            raise ExampleFailed(f"{block.where(page)}: the app crashed: {app.crash!r}")
    if timed_out:
        raise ExampleFailed(f"{block.where(page)}: {timed_out[0]}")


def _commands(block: Block) -> list[str]:
    """The commands of a shell block, comments dropped; ``.venv/bin/`` is the project's."""
    commands = []
    for line in _bootstrap(block.code).splitlines():
        command = line.split(" #")[0].strip()
        if command and not command.startswith("#"):
            commands.append(command.replace(".venv/bin/", f"{ROOT / '.venv' / 'bin'}/"))
    return commands


def _shell_environment() -> dict[str, str]:
    environment = dict(os.environ)
    environment["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{environment.get('PATH', '')}"
    # --app MODULE:ATTR finds the block's files and the example shop, as the python blocks do
    environment["PYTHONPATH"] = os.pathsep.join(
        [os.getcwd(), str(ROOT / "examples"), environment.get("PYTHONPATH", "")]
    )
    return environment


def run_shell(block: Block, page: str) -> None:
    environment = _shell_environment()
    for command in _commands(block):
        done = subprocess.run(
            command, shell=True, env=environment, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise ExampleFailed(
                f"{block.where(page)}: `{command}` exited {done.returncode}:\n"
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )


def serve_shell(block: Block, page: str) -> None:
    """Each command of a ``serves`` shell block runs for SHELL_SERVE_SECONDS, is stopped with
    SIGINT (Ctrl-C) and must exit 0 without a traceback."""
    for command in _commands(block):
        process = subprocess.Popen(  # no shell between: Ctrl-C reaches the command itself
            shlex.split(command), env=_shell_environment(), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            output, _ = process.communicate(timeout=SHELL_SERVE_SECONDS)
            raise ExampleFailed(
                f"{block.where(page)}: `{command}` ended by itself (exit {process.returncode}):"
                f"\n{output[-3000:]}"
            )
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            output, _ = process.communicate(timeout=90)
        if process.returncode != 0 or "Traceback" in output:
            raise ExampleFailed(
                f"{block.where(page)}: `{command}` stopped with exit {process.returncode}:"
                f"\n{output[-3000:]}"
            )


class _Said(list[str]):
    """The lines of what was done, printed as they come (a page that hangs shows how far it got)."""

    def append(self, line: str) -> None:
        print(line, flush=True)
        super().append(line)


def run_page(path: Path, display: str) -> list[str]:
    """Run every block of the page at ``path``; return one line per block (what was done),
    each printed as soon as its block is done."""
    done = _Said()
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in blocks_of(path.read_text()):
        if block.kind == "skip":
            if not block.argument:
                raise ExampleFailed(f"{block.where(display)}: a skipped block must say why")
            done.append(f"{block.where(display)}: skipped ({block.argument})")
        elif block.kind == "file":
            target = Path(block.argument)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_bootstrap(block.code))
            done.append(f"{block.where(display)}: written to {block.argument}")
        elif block.language in ("sh", "bash", "console", "shell"):
            if block.kind == "run":
                run_shell(block, display)
                done.append(f"{block.where(display)}: ran")
            elif block.kind == "serves":
                serve_shell(block, display)
                done.append(f"{block.where(display)}: served {SHELL_SERVE_SECONDS:g} s, stopped")
            else:
                done.append(f"{block.where(display)}: shown")
        elif block.language != "python":
            done.append(f"{block.where(display)}: shown")
        elif block.kind == "fragment":
            check_fragment(block, namespace, display)
            done.append(f"{block.where(display)}: checked (fragment)")
        elif block.kind == "serves":
            serve_python(block, namespace, display)
            served = block.argument or f"{SERVE_SECONDS:g} s"
            done.append(f"{block.where(display)}: served ({served}) and stopped")
        else:
            run_python(block, namespace, display)
            done.append(f"{block.where(display)}: ran")
    return done


def main() -> int:
    page = Path(sys.argv[1]).resolve()
    display = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)
    with tempfile.TemporaryDirectory(prefix="conveyor-docs-") as scratch:
        os.chdir(scratch)
        sys.path.insert(0, scratch)  # a block's files import as the reader's would
        sys.path.append(str(ROOT / "examples"))  # and so does the example shop (make run's)
        # a page that hangs is killed by the test after its PAGE_SECONDS: say where each
        # thread was shortly before, so the failure names the block and the call
        faulthandler.dump_traceback_later(HANG_SECONDS, exit=False)
        try:
            run_page(page, display)
        except ExampleFailed as failure:
            print(f"FAILED {failure}", flush=True)
            return 1
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # an example's leftover non-daemon threads must not hold the page open
