"""The tracing example runs end to end and prints one trace per order, across both hops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

EXAMPLE = Path(__file__).parents[3] / "examples" / "tracing" / "app.py"


def spans_of(output: str) -> list[dict]:
    decoder, spans, index = json.JSONDecoder(), [], 0
    while (start := output.find("{", index)) != -1:
        span, index = decoder.raw_decode(output, start)
        spans.append(span)
    return spans


def test_every_order_is_one_trace_from_checkout_to_shipment(kafka_bootstrap: str) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--orders", "2"],
        capture_output=True, text=True, timeout=180, check=False, stdin=subprocess.DEVNULL,
        env={**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "OTEL_EXPORTER_OTLP_ENDPOINT": ""},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "shipped 2 order(s)" in result.stderr
    assert "produce→end" in result.stderr, "the stage table"
    names_by_trace: dict[str, set[str]] = defaultdict(set)
    for span in spans_of(result.stdout):
        names_by_trace[span["context"]["trace_id"]].add(span["name"])
    checkouts = [names for names in names_by_trace.values() if "checkout" in names]
    assert len(checkouts) == 2
    for names in checkouts:
        assert {
            "send tracing_example_orders",
            "check order",
            "send tracing_example_shipments",
            "ship order",
        } <= names, names
