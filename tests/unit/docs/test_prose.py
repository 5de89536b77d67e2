"""The guides and the operations pages read as guides for users, not as a lab notebook: no run
dates, no issue numbers and no commit hashes in their prose, and a heading at least every 1,500
words so that the page's table of contents has something to show. How a figure was measured,
and how it came to be what it is, belongs in the benchmarks page and the development pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHECKED = ("docs/guides", "docs/operations")
PAGES = sorted(page for folder in CHECKED for page in (ROOT / folder).glob("*.md"))
MAX_WORDS_WITHOUT_HEADING = 1500

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s")
COMMENT = re.compile(r"<!--.*?-->")
LINK_TARGET = re.compile(r"\]\([^)]*\)")  # (page.md#anchor), (https://...): not prose
URL = re.compile(r"https?://\S+")
CODE_SPAN = re.compile(r"`([^`]*)`")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b(?!T\d)")  # an ISO timestamp is an example value
ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<![\w/&])#\d+\b", re.IGNORECASE)  # not librdkafka#4953
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Finding:
    """Something a guide should not say, at a 1-based line of a page."""

    page: Path
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}: {self.what}"


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """Each line outside fenced code blocks, 1-based, without HTML comments."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, COMMENT.sub("", line)


def is_commit_hash(token: str) -> bool:
    """Hexadecimal of 7 to 40 characters with a digit and a letter, as git abbreviates."""
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


def notebook_traces(page: Path, text: str) -> Iterator[Finding]:
    """Run dates, issue references and commit hashes in the prose of a page."""
    for number, line in prose_lines(text):
        bare = URL.sub("", LINK_TARGET.sub("]", line))
        for date in DATE.findall(bare):
            yield Finding(page, number, f"a date ({date})")
        for issue in ISSUE.findall(bare):
            yield Finding(page, number, f"an issue reference ({issue})")
        # in a code span only a hash alone: a pod's name (`shop-7d9c4b8f6-x2k4q`) is none
        alone = [span for span in CODE_SPAN.findall(bare) if HEX.fullmatch(span)]
        for token in HEX.findall(CODE_SPAN.sub("", bare)) + alone:
            if is_commit_hash(token):
                yield Finding(page, number, f"a commit hash ({token})")


def long_stretches(page: Path, text: str) -> Iterator[Finding]:
    """Stretches of more than MAX_WORDS_WITHOUT_HEADING words with no heading in them."""
    start, words = 1, 0
    for number, line in [*prose_lines(text), (-1, "# the end")]:
        if HEADING.match(line):
            if words > MAX_WORDS_WITHOUT_HEADING:
                yield Finding(
                    page, start, f"{words} words from here without a heading (at most "
                    f"{MAX_WORDS_WITHOUT_HEADING}): give the page subheadings"
                )  # fmt: skip
            start, words = number, 0
        else:
            words += len(WORD.findall(line))


def _report(findings: list[Finding]) -> str:
    return "\n".join(str(finding) for finding in findings)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_a_guide_names_no_run_date_issue_or_commit(page: Path) -> None:
    """Measurement history goes to docs/benchmarks.md or docs/development/performance-log.md."""
    findings = list(notebook_traces(page, page.read_text()))
    assert not findings, _report(findings)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_a_guide_has_a_heading_every_1500_words(page: Path) -> None:
    """The on-page table of contents is built from the headings."""
    findings = list(long_stretches(page, page.read_text()))
    assert not findings, _report(findings)


def test_the_pages_are_found() -> None:
    """An empty glob would pass every check above."""
    assert len(PAGES) > 20
    assert ROOT / "docs/operations/observability.md" in PAGES


@pytest.mark.parametrize(
    "line",
    [
        "Measured on 2026-11-25 (medians of 3).",
        "before the work of issue 21 that the next table shows",
        "the targets of issues 14 and 39",
        "see #39 for the plan",
        "the code before that day's work (8df2d42)",
        "beside the code from before the moves (`eb0fdeb`)",
    ],
)
def test_each_kind_of_trace_is_found(line: str) -> None:
    """A date, an issue (in words or as #N) and a commit hash, in prose or in a code span."""
    assert list(notebook_traces(ROOT / "docs/guides/x.md", f"Text.\n{line}\n"))


@pytest.mark.parametrize(
    "line",
    [
        "See [Liveness](deployment.md#liveness) and [the top](#3-retries).",
        "a known gap ([librdkafka#4953](https://github.com/confluentinc/librdkafka/issues/4953))",
        "(confluentinc/librdkafka#5040)",
        "`conveyor ctl seek orders 3 --time 2026-11-24T09:00:00+00:00`",
        "retention.ms: 186400000, 1,000,000 messages, e2e p50 0.28 ms, 0xdeadbeef1",
        "a Deployment's pods get a new name (`shop-7d9c4b8f6-x2k4q`) each time",
        "an issue the broker reports; issues with ordering",
    ],
)
def test_anchors_upstream_references_timestamps_and_numbers_pass(line: str) -> None:
    """What a guide may say: links with anchors, upstream issues, example timestamps, numbers."""
    assert not list(notebook_traces(ROOT / "docs/guides/x.md", f"Text.\n{line}\n"))


def test_code_blocks_are_not_prose() -> None:
    """A date or a hash inside a fenced block is an example value, and its words do not count."""
    text = "# Title\n\n```sh\ngit checkout 8df2d42  # 2026-11-25\n```\n" + "word " * 1400
    page = ROOT / "docs/guides/x.md"
    assert not list(notebook_traces(page, text))
    assert not list(long_stretches(page, text + "\n```python\n" + "x = 1\n" * 400 + "```\n"))


def test_a_long_stretch_is_named_by_where_it_starts() -> None:
    """The finding points at the heading the stretch follows; a subheading ends it."""
    page = ROOT / "docs/guides/x.md"
    long = "# Title\n\nIntro.\n\n## Part\n\n" + "word " * 1600 + "\n"
    [finding] = list(long_stretches(page, long))
    assert finding.line == 5
    split = long.replace("word " * 800, "word " * 800 + "\n## B\n", 1)
    assert not list(long_stretches(page, split))
