"""One run, start to verdict (docs/architecture.md, "The flow of one run"):

    nodes + DB ─► topics ─► workload (main phase) ─► heal ─► recovery wait
      ─► end offsets + final reads ─► teardown (in `finally`) ─► ingest + check

The history is written as the run goes (`history.jsonl`, flushed), so a run
that dies half-way still leaves a checkable prefix. Nodes are torn down and
their logs collected whatever happened; a broker that was found dead at the
end is reported, not hidden.
"""

from __future__ import annotations

import json
import logging
import platform
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from typing import TYPE_CHECKING, Callable

from cluster.readiness import admin_client, wait_for_coordinators
from history_analysis.history.writer import HistoryWriter
from history_analysis.report import write_report_quietly
from history_analysis.run_dir import LOG_FILE
from kchaos import __version__
from kchaos.cluster import SystemUnderTest
from kchaos.config import TestConfig
from kchaos.config_checks import validate
from kchaos.liveness import LivenessWatch, judged
from kchaos.progress import Progress
from kchaos.session import BackgroundSession
from nemesis.heal import heal_all
from nemesis.runner import Nemesis, NemesisThread
from nemesis.schedule import Step, plan, scheduled
from nemesis.scripts import SCRIPTS
from workloads.final import FinalReader, stable_within
from workloads.queue import Stats, consumer_plan, run_queue
from workloads.queue_config import Target

if TYPE_CHECKING:
    from checkers.suite import SuiteResult

log = logging.getLogger("kchaos.run")

# test.json's layout (its `schema_version`; 2: the ssh settings one part,
# kchaos/config.py reads 1 too); the history has its own
# (history_analysis/history/schema.py).
TEST_JSON_VERSION = 2
# The final readers' process ids start here, far above any worker's: a
# worker goes on as process + concurrency after every indeterminate end.
FINAL_PROCESSES = 1_000_000
COORDINATOR_WAIT = 60.0     # s the groups' coordinators may take to be found at setup


@dataclass
class RunOutcome:
    run_dir: Path
    bootstrap: str = ""
    final: dict = field(default_factory=dict)
    dropped: list[dict] = field(default_factory=list)   # planned starts never made
    node_failures: list[str] = field(default_factory=list)
    fault_effects: list[str] = field(default_factory=list)  # deaths a fault explains
    operations: int = 0
    errors: int = 0
    nemesis: list[dict] = field(default_factory=list)       # the faults as realised
    heal_problems: list[str] = field(default_factory=list)
    nemesis_error: str | None = None
    precondition_unmet: str | None = None                  # a nemesis script's (runner.Unmet)
    final_reads_ended: float | None = None                 # time.monotonic()
    checked: object = None                                 # what run_test's check returned


def new_run_dir(store: Path, name: str, now: datetime) -> Path:
    base = store / name / now.strftime("%Y%m%dT%H%M%S")
    run_dir, n = base, 1
    while run_dir.exists():     # two runs in one second
        n += 1
        run_dir = base.with_name(f"{base.name}-{n}")
    run_dir.mkdir(parents=True)
    return run_dir


def create_topics(bootstrap: str, topics: list[str], partitions: int, replication: int,
                  topic_config: list[str] = ()) -> None:
    """Create topics with the given settings (KEY=VALUE): on a cluster
    kchaos does not run, the broker's defaults are not ours to set."""
    from confluent_kafka.admin import NewTopic
    settings = dict(item.split("=", 1) for item in topic_config)
    # librdkafka's default request timeout (60 s), past the 30 s the
    # controller may take.
    with admin_client(bootstrap, **{"socket.timeout.ms": 60000}) as admin:
        futures = admin.create_topics([NewTopic(t, partitions, replication, config=settings)
                                       for t in topics], operation_timeout=30)
        for topic, future in futures.items():
            try:
                future.result(60)
            except Exception as e:  # noqa: BLE001 — KafkaException; named below
                raise RuntimeError(f"cannot create topic {topic} ({partitions} partitions, "
                                   f"replication factor {replication}"
                                   + "".join(f", {item}" for item in topic_config)
                                   + f") on {bootstrap}: {e}") from e


def run_test(config: TestConfig, progress: Progress | None = None,
             spark: BackgroundSession | None = None,
             check: Callable[[Path], object] | None = None) -> RunOutcome:
    """Run the test `config` describes; the caller checks the run directory.
    `spark`, if given, starts with the cluster and is ready before the
    workload begins: its start (a JVM, a first check) takes both cores for
    seconds, which the history must not show, and the check after the
    final reads finds it warm. `check(run_dir)`, if given, runs as soon as
    the history is complete, beside the teardown (`outcome.checked`)."""
    validate(config)
    started, clock = datetime.now(timezone.utc), time.monotonic()
    run_dir = new_run_dir(Path(config.store), config.name, started)
    outcome = RunOutcome(run_dir)
    progress = progress or Progress.for_terminal()
    # An external cluster keeps its topics and groups: names unique to this
    # run keep an earlier run's records and offsets out of this history.
    workload = config.workload
    token = "" if config.db == "reference" else "-" + started.strftime("%Y%m%dT%H%M%S")
    inputs, outputs = workload.topic_names(token), workload.output_topic_names(token)
    topics = inputs + outputs
    groups = workload.group_names(token)
    plan = consumer_plan(workload, groups)
    all_groups = groups + [group for _, mode, group in plan if mode != "subscribe"]
    # The groups whose coordinator is a role target: the members' (pipelines' too).
    member_groups = groups + [group for _, mode, group in plan if mode == "pipeline"]
    run_log = _log_to(run_dir / LOG_FILE)
    cluster = SystemUnderTest(config, run_dir)
    history = nemesis = checking = None
    watch = LivenessWatch(cluster, clock)
    stats = Stats()
    steps = nemesis_plan(config)
    try:
        write_test_json(run_dir, config, started, topics, all_groups, steps)
        progress.phase("setup")
        if spark is not None:
            spark.start()
        outcome.bootstrap = cluster.start()
        watch.start()
        if cluster.nodes:
            nemesis = Nemesis(cluster.view(topics, member_groups), None, seed=config.seed)
            outcome.heal_problems += heal_all(nemesis.cluster)     # a clean start
        create_topics(outcome.bootstrap, topics, workload.partitions,
                      workload.replication_factor, workload.topic_config)
        wait_for_coordinators(outcome.bootstrap, all_groups, COORDINATOR_WAIT)
        target = Target(outcome.bootstrap, tuple(inputs), tuple(groups), config.seed,
                        outputs=tuple(outputs))
        if spark is not None:
            spark.wait()
        history = HistoryWriter(run_dir / "history.jsonl")
        if nemesis is not None:
            nemesis.history = history
        enter("main", progress, watch, stats)
        run_main_phase(config, target, history, stats, nemesis, steps, outcome)
        if nemesis is not None:
            enter("heal", progress, watch)
            outcome.heal_problems += nemesis.heal()
        enter("recovery", progress, watch)
        time.sleep(config.recovery_time)
        enter("final", progress, watch)
        reader = FinalReader(history, bootstrap=outcome.bootstrap, library=workload.client,
                             settings=workload.client_settings,
                             partitions=[(t, p) for t in topics
                                         for p in range(workload.partitions)],
                             first_process=FINAL_PROCESSES,
                             process_step=workload.concurrency,
                             stable_within=stable_within(workload))
        outcome.final = reader.run(config.final_time_limit)
        outcome.final_reads_ended = time.monotonic()
    finally:
        progress.phase("teardown")
        # Before heal-all starts them again: a daemon that died unasked is
        # news, unless a fault injected on its node explains it.
        outcome.node_failures, outcome.fault_effects = judged(
            watch.stop(), nemesis.realised if nemesis is not None else [], cluster.logs)
        if nemesis is not None:
            # Whatever ended the run (an error, Ctrl-C): no fault outlives it.
            nemesis.history = None
            outcome.heal_problems += [p for p in heal_all(nemesis.cluster, ready_timeout=10)
                                      if p not in outcome.heal_problems]
            outcome.nemesis = nemesis.realised
        if history is not None:
            history.close()
        _amend_test_json(run_dir, {"final": outcome.final, "node_failures": outcome.node_failures,
                                   "fault_effects": outcome.fault_effects,
                                   "bootstrap": outcome.bootstrap, "nemesis": outcome.nemesis,
                                   "heal_problems": outcome.heal_problems,
                                   "nemesis_error": outcome.nemesis_error,
                                   "dropped": outcome.dropped,
                                   "precondition_unmet": outcome.precondition_unmet,
                                   "seconds": round(time.monotonic() - clock, 1)})
        # The history and the outcome are complete: the check needs no
        # cluster, so it runs while the nodes are torn down.
        checking = _Checking(check, run_dir) if check is not None and history is not None \
            and outcome.final_reads_ended is not None else None
        cluster.teardown()
        outcome.operations, outcome.errors = stats.snapshot()
        progress.close()
        _stop_logging_to(run_log)
    if checking is not None:
        outcome.checked = checking.result()
    return outcome


class _Checking:
    """check(run_dir) in a thread; result() waits and re-raises."""

    def __init__(self, check: Callable[[Path], object], run_dir: Path):
        self._result: list = []
        self._thread = threading.Thread(target=self._run, args=(check, run_dir),
                                        name="check", daemon=True)
        self._thread.start()

    def _run(self, check, run_dir) -> None:
        try:
            self._result.append((check(run_dir), None))
        except BaseException as e:  # noqa: BLE001 — re-raised by result()
            self._result.append((None, e))

    def result(self):
        self._thread.join()
        value, error = self._result[0]
        if error is not None:
            raise error
        return value


def enter(phase: str, progress: Progress, watch: LivenessWatch, stats=None) -> None:
    """The run moves on to phase: the terminal and the deaths seen say so."""
    watch.look()            # a death seen now happened in the phase before
    watch.phase = phase
    progress.phase(phase, stats)


def _log_to(path: Path) -> logging.Handler:
    """The run's log lines (harness, nemesis, client libraries) into
    path: the terminal shows progress and the verdict, the file the rest."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    root = logging.getLogger()
    handler.previous_level = root.level
    root.addHandler(handler)
    root.setLevel(min(root.level or logging.WARNING, logging.INFO))
    return handler


def _stop_logging_to(handler: logging.Handler) -> None:
    root = logging.getLogger()
    root.removeHandler(handler)
    root.setLevel(handler.previous_level)
    handler.close()


def nemesis_plan(config: TestConfig) -> list[Step]:
    return plan(config.nemesis, interval=config.nemesis_interval, duration=config.time_limit,
                seed=config.seed, targets=config.fault_targets,
                exclusive=config.nemesis_exclusive) if config.nemesis else []


def run_main_phase(config: TestConfig, target: Target, history: HistoryWriter,
                   stats: Stats, nemesis: Nemesis | None, steps: list[Step],
                   outcome: RunOutcome) -> None:
    """The workload for time_limit seconds, the nemesis beside it."""
    script = None
    if config.nemesis_script is not None:
        script = SCRIPTS[config.nemesis_script]
    elif steps:
        script = scheduled(steps)
    if nemesis is None or script is None:
        run_queue(config.workload, target, history, config.time_limit, stats)
        return
    thread = NemesisThread(nemesis, script)
    thread.start()
    try:
        run_queue(config.workload, target, history, config.time_limit, stats)
    finally:
        thread.finish()
        if thread.error is not None:
            outcome.nemesis_error = f"{type(thread.error).__name__}: {thread.error}"
        outcome.precondition_unmet = thread.unmet
        outcome.dropped = nemesis.dropped


def write_test_json(run_dir: Path, config: TestConfig, started: datetime,
                    topics: list[str], groups: list[str], steps: list[Step] = ()) -> None:
    body = {
        "schema_version": TEST_JSON_VERSION, "name": config.name, "seed": config.seed,
        "start_wall_time": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nodes": [f"n{i + 1}" for i in range(config.node_count())] if config.has_nodes() else [],
        "topics": {t: {"partitions": config.workload.partitions,
                       "replication_factor": config.workload.replication_factor}
                   for t in topics},
        "groups": groups,
        "config": config.to_json(),
        "nemesis_plan": [step.to_json() for step in steps],
        "sut": {"kind": config.db, "version": {"reference": __version__,
                                               "kafka": config.kafka_version}.get(config.db),
                "bugs": list(config.bugs)},
        "kchaos_version": __version__,
        "command_line": list(sys.argv),
        "versions": versions(),
    }
    _write_json(run_dir / "test.json", body)


def _write_json(path: Path, body: dict) -> None:
    """Whole or not at all: a harness killed mid-write leaves the old file."""
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(json.dumps(body, indent=1) + "\n")
    partial.replace(path)


def versions() -> dict[str, str]:
    """What the report shows beside the run: the interpreter and the client
    libraries the workload drove (kchaos's own is `kchaos_version`)."""
    found = {"python": platform.python_version()}
    try:
        import confluent_kafka
        found["confluent-kafka"] = confluent_kafka.version()[0]
        found["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    try:
        import kafka
        found["kafka-python"] = kafka.__version__
    except ImportError:
        pass
    # The Java client's release: its jars in Kafka's distribution cache.
    from workloads.clients.jvm import kafka_clients_version
    if (kafka_clients := kafka_clients_version()) is not None:
        found["kafka-clients"] = kafka_clients
    return found


def _amend_test_json(run_dir: Path, extra: dict, key: str = "outcome") -> None:
    path = run_dir / "test.json"
    if path.exists():
        body = json.loads(path.read_text())
        body[key] = extra
        _write_json(path, body)


@dataclass
class RunResult:
    """What a finished, checked run says: `valid` is True, False or "unknown"."""
    valid: bool | str
    counts: dict[str, int]
    anomalies: dict[str, list]
    run_dir: Path
    outcome: RunOutcome
    suite: SuiteResult
    seconds_to_verdict: float | None    # from the end of the final reads
    report: Path | None = None          # report.html; None when writing it failed


def run_and_check(config: TestConfig, spark, *,
                  progress: Progress | None = None) -> RunResult:
    """run_test, then the checker suite on its run directory (results.json),
    judged as the config says (`allow`, `max_examples`); what `kchaos run`
    and the pytest plugin both do. `spark` is a BackgroundSession (started
    during setup, if not yet) or a running SparkSession."""
    from kchaos.check import check_run
    if not isinstance(spark, BackgroundSession):
        spark = BackgroundSession.around(spark)
    options = config.check_options()
    verdict_at: list[float] = []

    def check(run_dir: Path) -> SuiteResult:
        suite = check_run(spark.get(), run_dir, options)
        verdict_at.append(time.monotonic())
        return suite

    outcome = run_test(config, progress, spark, check)
    suite = outcome.checked if outcome.checked is not None else check(outcome.run_dir)
    latency = None
    if outcome.final_reads_ended is not None:
        latency = round(verdict_at[0] - outcome.final_reads_ended, 2)
        _amend_test_json(outcome.run_dir, {"seconds_to_verdict": latency}, key="check")
    # After the verdict, and never in its way (a failure is logged).
    report = write_report_quietly(outcome.run_dir)
    return RunResult(suite.valid, dict(suite.result.counts), dict(suite.result.anomalies),
                     outcome.run_dir, outcome, suite, latency, report)
