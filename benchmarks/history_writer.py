"""How many events per second the history writer sustains from many threads.

    python benchmarks/history_writer.py [--threads 8] [--events 400000]

Each thread appends typical events (a send invocation with one record and
its ok completion carrying the offset) as fast as it can; the time runs from
the first append to `close` returning (every line written and fsynced). Then
the streaming validator reads the file back, and its rate is printed too.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from history_analysis.history import HistoryWriter, validate_history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=8, help="writer threads")
    parser.add_argument("--events", type=int, default=400_000, help="events in total")
    args = parser.parse_args()
    per_thread = args.events // args.threads // 2

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.jsonl"
        writer = HistoryWriter(path)

        def worker(process: int) -> None:
            for i in range(per_thread):
                send = {"topic": "jt0", "partition": i % 16, "value": process * 10**9 + i,
                        "offset": None}
                writer.append(process, "invoke", "send", {"sends": [send]})
                writer.append(process, "ok", "send", {"sends": [dict(send, offset=i)]})

        threads = [threading.Thread(target=worker, args=(p,)) for p in range(args.threads)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        writer.close()
        write_seconds = time.perf_counter() - start
        events = per_thread * 2 * args.threads

        start = time.perf_counter()
        report = validate_history(path)
        read_seconds = time.perf_counter() - start
        assert report.events == events, (report.events, events)

        size = path.stat().st_size
    print(f"history writer: {events} events from {args.threads} threads in "
          f"{write_seconds:.2f} s = {events / write_seconds:,.0f} events/s "
          f"({size / events:.0f} bytes/event)")
    print(f"history reader: validated {events} events in {read_seconds:.2f} s = "
          f"{events / read_seconds:,.0f} events/s")


if __name__ == "__main__":
    main()
