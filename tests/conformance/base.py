"""What every step shares: the Step protocol, the normalisations that are
not divergences (values each cluster chooses for itself, or free text),
and the scenario runner that drives both clusters and compares.

Normalisations (NORMALISATIONS, mirrored in docs/broker.md): a value
rewritten here is one that no client may rely on being any particular
value — never a behaviour. Everything else is compared as it is, and a
difference is either an accepted divergence (divergences.py) or a failure.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

from tests.conformance.compare import Outcome, compare
from tests.conformance.wire import Closed

NORMALISATIONS = {
    "error-message-text": "error_message fields are free text: compared as present or null "
                          "(empty and \"NONE\" as they are), not by their words",
    "broker-addresses": "a broker's host and port are its node's address, different per "
                        "cluster: compared as the node id they belong to",
    "cluster-id": "each cluster has an id of its own",
    "assigned-ids": "member ids and producer ids are chosen by the broker: compared by "
                    "the scenario's name for the member or producer (or transactional id) "
                    "they were given to",
    "unordered-lists": "arrays that are maps in the protocol (topics, partitions, configs, "
                       "group members, producers, transactions) are compared by key, not by "
                       "position; a Fetch's aborted transactions by first offset",
    "auto-placement": "where replicas go without a manual assignment is the controller's "
                      "choice (Kafka's is random): compared as replica count, distinctness, "
                      "leader = first replica and ISR = replicas",
    "coordinator-node": "which broker coordinates a group or a transactional id follows from "
                        "the placement of __consumer_offsets or __transaction_state: compared "
                        "as one of the cluster's brokers; ListTransactions, which each "
                        "coordinator answers for its own ids, as the union over all brokers",
    "log-append-time": "a broker's clock at append (LogAppendTime, a transaction marker's "
                       "timestamp, hence DescribeProducers' last timestamp after one) or at a "
                       "transaction's start (DescribeTransactions): compared as within a "
                       "minute of the test's clock",
    "leader-after-leader-left": "when a group's leader leaves, Kafka makes the first member "
                                "of a HashMap keyed by random member ids the next leader: "
                                "compared as one of the generation's members, the one whose "
                                "JoinGroup answer carries the member list",
    "replication-timing": "after an acks=0 or acks=1 append the suite waits (bounded) until "
                          "the high watermark reaches the log end it wrote, as a reader "
                          "would retry, so that followers' fetch timing is not compared",
    "transaction-completion": "EndTxn is answered before its markers are written: after a "
                              "successful one the suite waits (bounded) until the coordinator "
                              "has completed the transaction, so that the last stable offset "
                              "has settled; an InitProducerId answered CONCURRENT_TRANSACTIONS "
                              "while it aborts an open transaction is asked again until it "
                              "ends, its first and last answers compared",
}


def text(value: str | None) -> str | None:
    """error-message-text: null, empty and "NONE" (what Kafka writes for
    no error in some APIs) are kept as they are; other text is "<text>"."""
    return value if value in (None, "", "NONE") else "<text>"


class Step:
    """One request (or a few that belong together) of a scenario: `run`
    sends it to one cluster and returns its answer, normalised."""
    api: ClassVar[str]

    def run(self, s) -> Any:
        raise NotImplementedError


@dataclass
class Result:
    outcome: Outcome
    observed: list[tuple[Step, Any, Any]]   # (step, reference answer, kafka answer)


def run_on(session, steps: list[Step]) -> list[Any]:
    answers = []
    for step in steps:
        try:
            answers.append(step.run(session))
        except Closed:
            # Compared as such: both must close (acks=0 errors), or neither.
            answers.append({"connection": "closed by the broker"})
    return answers


def run_scenario(make_sessions, steps: list[Step], pool: ThreadPoolExecutor) -> Result:
    """The steps on both clusters at once (each in its own thread, in
    order), then every answer compared."""
    reference, kafka = make_sessions()
    try:
        ref_answers, kafka_answers = pool.map(lambda s: run_on(s, steps), [reference, kafka])
        ref_answers, kafka_answers = list(ref_answers), list(kafka_answers)
    finally:
        reference.close()
        kafka.close()
    outcome = Outcome()
    for i, (step, a, b) in enumerate(zip(steps, ref_answers, kafka_answers)):
        compare(step.api, a, b, step, outcome, i)
    return Result(outcome, list(zip(steps, ref_answers, kafka_answers)))
