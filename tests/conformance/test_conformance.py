"""Differential conformance: the same request sequences to the reference
broker and to Apache Kafka, on one node and on three, compared answer by
answer (see docs/broker.md, "Conformance with Apache Kafka").

One test per cluster size runs every area's Hypothesis search in turn, so
that under pytest-xdist a worker starts at most one pair of clusters (the
expensive part). Examples are derandomized: CI sees the same ones every
run. Each example's scenario is printed in full when it fails, with every
difference no accepted divergence explains; the test prints, per area,
the examples run and how often each accepted divergence applied.
CONFORMANCE_AREAS=groups,records runs only those areas (for development);
the areas are topics, records, producer, groups and transactions.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings

from tests.conformance import requests as rq
from tests.conformance.base import run_scenario
from tests.conformance.records import Rec
from tests.conformance.session import Session
from tests.conformance.steps_records import Fetch
from tests.conformance.steps_topics import CreateTopics, TopicSpec
from tests.conformance.steps_transactions import AddPartitions, EndTxn, InitTxnProducer, TxnProduce
from tests.conformance.strategies import AREAS, T0

pytestmark = pytest.mark.conformance

# Examples per area and cluster size: about 3 minutes for the whole suite
# on the project's 2-core machine, cluster startup included, when nothing
# else runs (transactions: about 10 s on one node, 30 s on three; twice
# that on a loaded machine).
EXAMPLES = {"topics": 30, "records": 30, "producer": 30, "groups": 30, "transactions": 25}
_names = itertools.count()
_TOKEN = secrets.token_hex(2)


def _check(pair, area: str, steps, stats: dict) -> None:
    prefix = f"cf{_TOKEN}-{next(_names)}"
    with ThreadPoolExecutor(2) as pool:
        result = run_scenario(lambda: (Session(pair.reference, pair.versions, prefix),
                                       Session(pair.kafka, pair.versions, prefix)), steps, pool)
    stats["examples"] += 1
    stats["steps"] += len(steps)
    stats["divergences"].update(result.outcome.applied)
    if result.outcome.unexplained:
        lines = [f"{len(result.outcome.unexplained)} unexplained difference(s), "
                 f"{pair.size}-node clusters, area {area}, names {prefix}-*:"]
        for i, (step, ref, kafka) in enumerate(result.observed):
            lines.append(f"  #{i} {step}")
        lines += [f"  - {d}" for d in result.outcome.unexplained]
        raise AssertionError("\n".join(lines))


@pytest.mark.slow
@pytest.mark.parametrize("size", [1, 3], ids=["1-node", "3-nodes"])
def test_reference_broker_answers_as_kafka(size, cluster_pairs, request):
    pair = cluster_pairs.get(size)
    wanted = os.environ.get("CONFORMANCE_AREAS")
    areas = [a for a in AREAS if not wanted or a in wanted.split(",")]
    failures, report = [], {}
    for area in areas:
        stats = {"examples": 0, "steps": 0, "divergences": Counter()}
        started = time.monotonic()

        @settings(max_examples=EXAMPLES[area], deadline=None, derandomize=True,
                  database=None, print_blob=False,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(steps=AREAS[area](size))
        def check(steps):
            _check(pair, area, steps, stats)

        try:
            check()
        except Exception:       # noqa: BLE001 — every area runs; all failures are reported
            failures.append(f"--- {area} ---\n{traceback.format_exc()}")
        report[area] = {"examples": stats["examples"], "steps": stats["steps"],
                        "seconds": round(time.monotonic() - started, 1),
                        "divergences": dict(stats["divergences"])}
    print(f"\nconformance {size}-node: {json.dumps(report, indent=1)}")
    request.node.user_properties.append(("conformance", report))
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_a_refused_verification_holds_back_a_later_sequence_as_in_kafka(cluster_pairs):
    """Kafka's VerificationStateEntry (KIP-890 part 1), which the search
    reaches rarely: a producer's batch 0 on a partition not in its
    transaction is refused, the leader keeping sequence 0 as the lowest
    seen; once the partition is added, batch 1 is OUT_OF_ORDER_SEQUENCE,
    and batch 0 then 1 go in."""
    batch = (Rec(value=b"v", timestamp=T0),)
    steps = [CreateTopics((TopicSpec("t0", 1, 1),)), InitTxnProducer("x0"),
             TxnProduce("x0", "t0", 0, batch),                      # INVALID_TXN_STATE
             AddPartitions("x0", (("t0", 0),)),
             TxnProduce("x0", "t0", 0, batch, sequence="gap"),      # 1: out of order
             TxnProduce("x0", "t0", 0, batch), TxnProduce("x0", "t0", 0, batch),
             EndTxn("x0", True), Fetch("t0", 0, 0, isolation_level=rq.READ_COMMITTED)]
    _check(cluster_pairs.get(1), "transactions", steps,
           {"examples": 0, "steps": 0, "divergences": Counter()})
