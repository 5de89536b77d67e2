"""Writes rows into a table at a steady rate, each stamped with the microsecond it was
written (``t_us``), for bench/connect.py's change-to-Kafka latency; a process of its own so
that the reader's process holds the reader only.

    python _cdc_writer.py DSN TABLE RATE SECONDS FIRST_ID
"""

from __future__ import annotations

import sys
import threading
import time

import psycopg


def main() -> None:
    dsn, table, rate, seconds, first = sys.argv[1:6]
    per_second, first_id = float(rate), int(first)
    batch = max(1, int(per_second // 1000))  # rows a transaction: 1 ms of rows
    pace = threading.Event()  # never set: waits out the pace
    payload = "x" * 80
    with psycopg.connect(dsn, autocommit=False) as db:
        began = time.monotonic()
        written = 0
        while time.monotonic() - began < float(seconds):
            with db.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO {table} (id, t_us, payload) VALUES (%s, %s, %s)",
                    [
                        (first_id + written + n, time.time_ns() // 1000, payload)
                        for n in range(batch)
                    ],
                )
            db.commit()
            written += batch
            pace.wait(began + written / per_second - time.monotonic())
    print(written)


if __name__ == "__main__":
    main()
