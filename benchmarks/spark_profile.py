"""Where a Spark job's time went, from Spark's own event log: per stage,
its name, wall seconds, tasks, shuffle bytes written and read, and bytes
spilled to memory and disk. The benchmark enables the log for its session
(`settings(dir)`) and reads it back after the check (`stages(dir)`)."""

from __future__ import annotations

import json
from pathlib import Path


def settings(directory: Path) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.compress": "false",
            "spark.eventLog.dir": directory.resolve().as_uri()}


def stages(directory: Path, since_ms: float = 0) -> list[dict]:
    """Stages completed after `since_ms` (epoch milliseconds), in order."""
    metrics: dict[tuple[Path, int], dict] = {}     # stage IDs restart in each application
    done: list[dict] = []
    for log in sorted(p for p in Path(directory).rglob("*") if p.is_file()):
        # One application: a folder of rolled files (event log v2), or a file.
        application = log.parent if log.parent != Path(directory) else log
        for line in log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:      # a status file, or a last line still being written
                continue
            if not isinstance(event, dict):
                continue
            kind = event.get("Event")
            if kind == "SparkListenerTaskEnd":
                m = event.get("Task Metrics") or {}
                total = metrics.setdefault((application, event["Stage ID"]), dict.fromkeys(
                    ("shuffle_written", "shuffle_read", "spilled_memory", "spilled_disk"), 0))
                write = m.get("Shuffle Write Metrics") or {}
                read = m.get("Shuffle Read Metrics") or {}
                total["shuffle_written"] += write.get("Shuffle Bytes Written", 0)
                total["shuffle_read"] += read.get("Remote Bytes Read", 0) + read.get(
                    "Local Bytes Read", 0)
                total["spilled_memory"] += m.get("Memory Bytes Spilled", 0)
                total["spilled_disk"] += m.get("Disk Bytes Spilled", 0)
            elif kind == "SparkListenerStageCompleted":
                info = event["Stage Info"]
                begun, ended = info.get("Submission Time"), info.get("Completion Time")
                if begun is None or ended is None or begun < since_ms:
                    continue
                done.append({"stage": info["Stage ID"], "name": info["Stage Name"].split(" at ")[0],
                             "seconds": round((ended - begun) / 1000, 2),
                             "tasks": info["Number of Tasks"],
                             **metrics.get((application, info["Stage ID"]), {})})
    return done


def summary(rows: list[dict]) -> str:
    mib = 1 << 20
    lines = [f"{'stage':>6} {'seconds':>8} {'tasks':>6} {'shuffle w MiB':>14} "
             f"{'shuffle r MiB':>14} {'spill mem MiB':>14} {'spill disk MiB':>15}  what"]
    for r in rows:
        lines.append(f"{r['stage']:>6} {r['seconds']:>8.2f} {r['tasks']:>6} "
                     f"{r.get('shuffle_written', 0) / mib:>14.1f} "
                     f"{r.get('shuffle_read', 0) / mib:>14.1f} "
                     f"{r.get('spilled_memory', 0) / mib:>14.1f} "
                     f"{r.get('spilled_disk', 0) / mib:>15.1f}  {r['name']}")
    return "\n".join(lines)
