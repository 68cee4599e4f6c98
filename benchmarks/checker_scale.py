"""How fast the checker suite runs on a large history, and whether it finds
exactly the anomalies injected into it.

    python benchmarks/checker_scale.py --events 10000000 --anomalies 3 --seed 1 \\
        [--jsonl] [--out DIR] [--reuse] [--spark-conf KEY=VALUE ...] [--workers N]

Spark generates a correct base run of about N history events (lines of
history.jsonl; each adds about one row to `sends` + `reads` together with
the other tables: benchmarks/synthetic_history.py) as the Parquet tables of
OUT/history, or with --jsonl as OUT/history.jsonl, which ingest then turns
into the tables (timed). K cases of every anomaly type of docs/anomalies.md are
injected (INJECTIONS below: their operations come right after the base
run's setup, and the final-phase ones at the very end), each on its own
partition (jt0 partitions 64 and up: case c of type t is partition 64 + tK +
c), with its own processes (1000 + 8·case + role) and its own group
(kchaos-x<case>), so no case can produce another type. Then the suite runs
on the tables (timed, also per checker family). Printed: events/s of ingest
and check, the peak RSS (VmHWM) of this Python process and of Spark's JVM
during each, the JVM heap, and per type the cases expected, found, and found
on that type's own injected partitions. Exit 0 only if exactly the injected
anomalies were found (no other type, no checker error, nothing undecided).
OUT also gets test.json, results.json and benchmark.json (the figures).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pyarrow.dataset as ds
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

# benchmarks/ is not an installed package: import it from the repository.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import duckdb_checks, spark_profile  # noqa: E402
from benchmarks import synthetic_files  # noqa: E402
from benchmarks import synthetic_history as sh  # noqa: E402
from benchmarks.spark_standalone import StandaloneCluster  # noqa: E402
from benchmarks.injections import ALSO, injected_ops, injection_steps  # noqa: E402
from checkers.history import History  # noqa: E402
from checkers.result import ANOMALY_TYPES, MAX_EXAMPLES, CheckOptions  # noqa: E402
from checkers.suite import check_history, write_results  # noqa: E402
from history_analysis.buckets import bucket_folders  # noqa: E402
from history_analysis.ingest import ingest  # noqa: E402
from history_analysis.spark import parse_conf, spark_session  # noqa: E402

# --- generating ------------------------------------------------------------------

MANIFEST = "_synthetic.json"


def plan(events: int, cases: int, seed: int) -> sh.Layout:
    _, main_steps, final_steps = injection_steps()
    return sh.Layout.plan(events, seed, 2 * cases * main_steps, 2 * cases * final_steps)


def first_injected(config: dict) -> int:
    """The first injected partition, from the layout a run records (its
    test.json `config`, the manifest's `layout`)."""
    return int(config["injected_partitions"].split("-")[0])


def generate(spark, out: Path, events: int, cases: int, seed: int, jsonl: bool) -> sh.Layout:
    """Write OUT/history.jsonl (jsonl) or the tables of OUT/history, and test.json."""
    layout = plan(events, cases, seed)
    base = sh.BaseRun(layout)
    setup = spark.range(1).select(F.lit(0).alias("section"), base.setup_ops().alias("ops"))
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)
    injected = _materialized(injected_ops(spark, cases, layout), out / ".injected")
    rows = base.rows(spark)
    if jsonl:
        def ordered(frame: DataFrame) -> DataFrame:  # small: one op per row
            return frame.repartition(1).sortWithinPartitions(F.col("ops")[0]["invoke_index"]) \
                .select("ops")
        sections = [ordered(setup.unionByName(injected.where("section = 0"))), rows,
                    ordered(injected.where("section = 1"))]
        synthetic_files.write_jsonl(sections, layout, out)
    else:
        # A history.jsonl of an earlier run would not describe these tables.
        (out / "history.jsonl").unlink(missing_ok=True)
        ops = setup.select("ops").unionByName(injected.select("ops")).unionByName(rows) \
            .select(F.explode("ops").alias("o")).select("o.*")
        synthetic_files.write_tables(ops, layout, out)
    topics = {sh.TOPIC: {"partitions": layout.partitions + len(ANOMALY_TYPES) * cases,
                         "replication_factor": 1}}
    config = {"events": layout.events, "anomalies": cases, "rounds": layout.rounds,
              "epoch_rounds": layout.epoch, "rebalances": layout.rebalances,
              "injected_partitions": f"{layout.partitions}-"
                                     f"{layout.partitions + len(ANOMALY_TYPES) * cases - 1}"}
    (out / "test.json").write_text(json.dumps({
        "schema_version": 1, "name": "checker-scale", "seed": seed,
        "start_wall_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "nodes": [],
        "topics": topics, "groups": [f"kchaos-g{g}" for g in range(sh.GROUPS)],
        "config": config, "sut": {"kind": "synthetic", "version": "1",
                                  "bugs": list(ANOMALY_TYPES) if cases else []},
        # What a run that wrote this history would have recorded: its final
        # phase reads every partition to its end (synthetic_history.py), no
        # daemon died, nothing was left to heal.
        "outcome": {"final": {"reached": True}, "node_failures": [], "fault_effects": [],
                    "heal_problems": [], "nemesis": [], "nemesis_error": None,
                    "precondition_unmet": None}}, indent=2) + "\n")
    shutil.rmtree(out / ".injected")
    (out / MANIFEST).write_text(json.dumps({"events": events, "anomalies": cases, "seed": seed,
                                            "jsonl": jsonl, "layout": config}) + "\n")
    return layout


def _materialized(frame: DataFrame, path: Path) -> DataFrame:
    """Write a small frame and read it back: the injected operations are
    built once, not in each plan that uses them."""
    with synthetic_files.interpreted(frame.sparkSession):
        frame.write.mode("overwrite").parquet(path.resolve().as_uri())
    return frame.sparkSession.read.parquet(path.resolve().as_uri())


def reusable(out: Path, events: int, cases: int, seed: int, jsonl: bool) -> bool:
    try:
        made = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    have = (out / "history.jsonl").is_file() if jsonl else (out / "history").is_dir()
    if not have or (made["events"], made["anomalies"], made["seed"]) != (events, cases, seed) \
            or (jsonl and not made["jsonl"]):
        return False
    # Generated by an older generator: partitions laid out otherwise, or
    # tables from before buckets (read as one bucket, they would measure
    # a check on one core). A JSONL is re-ingested as needed anyway.
    return first_injected(made["layout"]) == plan(events, cases, seed).partitions \
        and (jsonl or bucket_folders(out / "history") != [""])


# --- measuring ---------------------------------------------------------------------

def _proc_kib(pid: int, field: str = "VmHWM") -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak(pid: int) -> None:
    """Linux: writing 5 to clear_refs resets VmHWM to the current RSS."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def jvm_pid() -> int | None:
    """The java process among this process's descendants (py4j's gateway)."""
    java = sorted(p for p, comm in _descendants(os.getpid()).items() if comm == "java")
    return java[0] if java else None


def _descendants(root: int) -> dict[int, str]:
    """Every descendant of process `root`: pid -> command name."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
            parents[int(entry.name)] = (int(rest.split()[1]), comm)
    mine, frontier = set(), {root}
    while frontier:
        frontier = {p for p, (ppid, _) in parents.items() if ppid in frontier} - mine
        mine |= frontier
    return {p: parents[p][1] for p in mine}


class WorkerMemory:
    """The Python workers' memory while a block runs: every 0.2 s, the RSS
    of each Python process the JVM started (Spark's Python workers, which
    run the checkers' numpy), the largest one and the largest sum."""

    def __init__(self, jvm: int | None):
        self.jvm, self.largest_mib, self.total_mib = jvm, 0, 0
        self._stop = threading.Event()

    def __enter__(self) -> WorkerMemory:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while self.jvm and not self._stop.wait(0.2):
            sizes = [(_proc_kib(pid, "VmRSS") or 0) // 1024
                     for pid, comm in _descendants(self.jvm).items() if comm.startswith("python")]
            self.largest_mib = max(self.largest_mib, max(sizes, default=0))
            self.total_mib = max(self.total_mib, sum(sizes))


def measure(name: str, events: int, pids: dict, fn):
    for pid in pids.values():
        if pid:
            _reset_peak(pid)
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    figures = {"seconds": round(seconds, 2), "events_per_second": round(events / seconds),
               **{f"peak_rss_mib_{who}": round((_proc_kib(pid) or 0) / 1024)
                  for who, pid in pids.items() if pid}}
    print(f"{name:>6}: {events:,} events in {seconds:.1f} s = {events / seconds:,.0f} events/s; "
          f"peak RSS " + ", ".join(f"{who} {figures[f'peak_rss_mib_{who}']:,} MiB"
                                  for who, pid in pids.items() if pid), flush=True)
    return result, figures


def compare(result, run_dir: Path) -> tuple[list[dict], list[str]]:
    """Per type: cases expected, found, and found on the type's own injected
    partitions (one each: case c of type t is partition P + tK + c, after
    the base run's P, as the run's test.json records); and the types found
    that were not injected."""
    config = json.loads((run_dir / "test.json").read_text())["config"]
    cases, base = config["anomalies"], first_injected(config)

    def own(name: str) -> set[int]:
        first = base + ANOMALY_TYPES.index(name) * cases
        return set(range(first, first + cases))
    rows = []
    for name in ANOMALY_TYPES:
        # A type another type's cases show too (ALSO) counts theirs as its own.
        makers = [name, *(other for other, also in ALSO.items() if name in also)]
        partitions = set().union(*(own(m) for m in makers))
        where = {case["partition"] if "partition" in case else case["places"][0]["partition"]
                 for case in result.anomalies.get(name, [])}
        rows.append({"type": name, "expected": cases * len(makers),
                     "found": result.counts.get(name, 0),
                     "on_own_partitions": len(where & partitions)})
    extra = sorted(t for t, n in result.counts.items()
                   if n and (t not in ANOMALY_TYPES or not cases))
    return rows, extra


# --- the command -----------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="history events, about")
    parser.add_argument("--anomalies", type=int, default=3, help="cases injected per type")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jsonl", action="store_true",
                        help="write history.jsonl and time its ingest")
    parser.add_argument("--out", type=Path, default=None,
                        help="run directory (default store/checker-scale-N<events>-K<k>-S<seed>)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep OUT's history if it was generated with the same arguments")
    parser.add_argument("--spark-conf", action="extend", nargs="+", default=[],
                        metavar="KEY=VALUE",
                        help="a Spark setting (repeatable); default spark.driver.memory=8g")
    parser.add_argument("--workers", type=int, default=0, metavar="N",
                        help="run on a Spark standalone cluster of N workers started here "
                             "(benchmarks/spark_standalone.py), the cores shared among them; "
                             "default 0: local[*]")
    parser.add_argument("--worker-memory", default="6g",
                        help="--workers: each worker's memory, its executor's heap")
    args = parser.parse_args()
    if args.events < 1 or args.anomalies < 0 or args.workers < 0:
        parser.error("--events must be positive, --anomalies and --workers not negative")
    out = args.out or Path(f"store/checker-scale-N{args.events}-K{args.anomalies}-S{args.seed}")
    with contextlib.ExitStack() as stack:
        master = None
        if args.workers:
            cluster = stack.enter_context(StandaloneCluster(
                out / ".cluster", workers=args.workers,
                cores=max(1, (os.cpu_count() or 1) // args.workers), memory=args.worker_memory))
            master = cluster.url
            print(f"Spark standalone cluster at {master}: {args.workers} workers of "
                  f"{cluster.cores} core(s) and {args.worker_memory}", flush=True)
        return run(args, out, master)


def run(args, out: Path, master: str | None) -> int:
    events_log = out / ".spark-events"
    conf = {"spark.driver.memory": "8g", **spark_profile.settings(events_log),
            **({"spark.executor.memory": args.worker_memory} if master else {}),
            **parse_conf(args.spark_conf)}
    spark = spark_session(master=master, conf=conf, scratch_dir=out / ".spark")
    pids = {"python": os.getpid(), "jvm": jvm_pid()}

    if args.reuse and reusable(out, args.events, args.anomalies, args.seed, args.jsonl):
        layout = json.loads((out / MANIFEST).read_text())["layout"]
        events = layout["events"]
        print(f"reusing {out}: {events:,} events")
    else:
        start = time.perf_counter()
        layout = generate(spark, out, args.events, args.anomalies, args.seed, args.jsonl)
        events = layout.events
        print(f"generated {out}{'/history.jsonl' if args.jsonl else '/history'}: {events:,} "
              f"events ({layout.rounds} rounds, a rebalance every {layout.epoch}), "
              f"{args.anomalies} case(s) of each of {len(ANOMALY_TYPES)} types, in "
              f"{time.perf_counter() - start:.1f} s", flush=True)

    figures = {"events": events, "anomalies": args.anomalies, "seed": args.seed,
               "spark_master": spark.sparkContext.master, "workers": args.workers,
               "spark_driver_memory": spark.conf.get("spark.driver.memory"),
               "jvm_max_heap_mib": round(spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
                                         .maxMemory() / 2**20)}
    if args.jsonl:
        _, figures["ingest"] = measure("ingest", events, pids, lambda: ingest(out))
    rows = {t: ds.dataset(out / "history" / t, format="parquet").count_rows()
            for t in ("sends", "reads")}
    figures["rows"] = rows
    print(f"tables: {rows['sends']:,} records sent, {rows['reads']:,} read")

    def check():
        history = History.open(spark, out / "history")
        try:
            # Every case among the examples, to see where each was found.
            return check_history(history, CheckOptions(
                max_examples=max(MAX_EXAMPLES, args.anomalies)))
        finally:
            history.release()

    started_ms = time.time() * 1000
    with WorkerMemory(pids["jvm"]) as workers:
        suite, figures["check"] = measure("check", events, pids, check)
    figures["check"].update(python_worker_peak_rss_mib=workers.largest_mib,
                            python_workers_peak_rss_mib=workers.total_mib)
    print(f"Python workers (the checkers' numpy): peak RSS {workers.largest_mib:,} MiB the "
          f"largest, {workers.total_mib:,} MiB all together", flush=True)
    spark.stop()        # the event log is complete once the session ends
    stages = spark_profile.stages(events_log, since_ms=started_ms)
    figures["check"]["stages"] = stages
    print("profile of the check, by Spark stage:\n" + spark_profile.summary(stages))
    anchor = None
    if duckdb_checks.available():
        try:
            anchor = duckdb_checks.run(out / "history")
        except Exception as e:  # noqa: BLE001 — the anchor's failure must not lose the check's
            # Seen at 10^9: DuckDB ran out of its memory limit (18.8 GiB).
            figures["duckdb"] = {"error": f"{type(e).__name__}: {e}".splitlines()[0]}
            print(f"DuckDB's checks failed, no anchor this run: {figures['duckdb']['error']}")
    if anchor is not None:
        seconds, counts = anchor
        ratio = figures["check"]["seconds"] / seconds
        figures["duckdb"] = {"seconds": round(seconds, 2), "counts": counts,
                             "check_to_duckdb": round(ratio, 1)}
        print(f"DuckDB's three core checks (duplicate, inconsistent-offsets, lost-write) on "
              f"the same tables: {seconds:.2f} s; counts {counts}; kchaos's whole check "
              f"takes {ratio:.1f}x as long")
    elif not duckdb_checks.available():
        print("DuckDB is not installed (pip install '.[bench]'): no anchor this run")
    write_results(out, suite)
    print(f"JVM heap: spark.driver.memory={figures['spark_driver_memory']} "
          f"(max heap {figures['jvm_max_heap_mib']:,} MiB)")

    result = suite.result
    table, extra = compare(result, out)
    matches = lambda r: r["expected"] == r["found"] == r["on_own_partitions"]  # noqa: E731
    exact = all(map(matches, table)) and not extra and not result.errors and not result.unknown
    print(f"\n{'anomaly':<24}{'expected':>9}{'found':>7}{'where injected':>16}")
    for r in table:
        mark = "" if matches(r) else "   <-- mismatch"
        print(f"{r['type']:<24}{r['expected']:>9}{r['found']:>7}{r['on_own_partitions']:>16}{mark}")
    for t in extra:
        print(f"{t:<24}{0:>9}{result.counts[t]:>7}   <-- not injected")
    for e in result.errors:
        print(f"checker {e['checker']} failed: {e['error']}")
    for t, u in result.unknown.items():
        print(f"undecided {t}: {json.dumps(u, default=str)[:300]}")
    for r in table:
        if not matches(r) and result.anomalies.get(r["type"]):
            print(f"example {r['type']}: {json.dumps(result.anomalies[r['type']][0], default=str)}")
    for t in extra:
        print(f"example {t}: {json.dumps(result.anomalies[t][0], default=str)}")
    print(f"\n{'EXACT: found exactly the injected anomalies' if exact else 'MISMATCH'} "
          f"(valid={suite.valid}); results in {out / 'results.json'}")
    figures.update(exact=exact, anomalies_found=dict(result.counts), extra_types=extra)
    (out / "benchmark.json").write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
