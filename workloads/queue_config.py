"""The queue workload's configuration (`QueueConfig`, a run's `workload`)
and what one run's workload acts on (`Target`)."""

from __future__ import annotations

from dataclasses import dataclass

from settings import setting
from workloads.clients import (LIBRARIES, PIPELINE_LIBRARIES, TRANSACTIONAL_LIBRARIES,
                               ClientSettings)

CONSUMER_MODES = ("assign", "subscribe", "mixed")
# How often a coordinator looks for expired transactions: the default of
# Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms, which
# the system under test is assumed to keep (a slower one needs longer waits).
ABORT_SWEEP_S = 10.0
STALL_MARGIN_S = 1.0        # for the abort's own write once the sweep found it


@dataclass
class QueueConfig:
    """The queue workload's settings: nested in a run's TestConfig as
    `workload`, flattened on the command line."""
    client: str = setting("confluent-kafka", "The client library.", choices=LIBRARIES)
    topics: int = setting(1, "Topics to create.")
    partitions: int = setting(4, "Partitions per topic.")
    replication_factor: int = setting(3, "Replication factor of the topics.")
    topic_config: list[str] = setting(
        default_factory=list, flag="--topic-config", metavar="KEY=VALUE", multiple=True,
        help="A topic setting sent with CreateTopics (repeatable), e.g. "
             "min.insync.replicas=2: on a cluster kchaos does not run, the broker's "
             "defaults are not ours to set.")
    concurrency: int = setting(6, "Worker threads, alternately producers and consumers.")
    rate: float = setting(200.0, "Operations per second, all workers together.")
    records_per_send: int = setting(1, "Values one send operation produces, back to back to "
                                    "one partition (more than 1 pipelines batches).")
    consumer_mode: str = setting("mixed", "How consumers read: assign, subscribe, or both "
                                 "(alternating).", choices=CONSUMER_MODES)
    groups: int = setting(1, "Consumer groups of the subscribe-mode consumers.")
    crash_clients_every: float | None = setting(
        None, "Crash a worker's client about every S seconds.", metavar="S",
        default_text="never")
    # Slow processing (KIP-62): a subscribe-mode consumer stalls past
    # max.poll.interval.ms before a commit, about every S seconds; its
    # group replaces it meanwhile, and what it commits then is a zombie's.
    stall_consumers_every: float | None = setting(
        None, "About every S seconds, a subscribe-mode consumer stalls 1.5 x "
        "max.poll.interval.ms before a commit, as slow processing does.", metavar="S",
        default_text="never")
    # The end a consumer is told during faults (ListOffsets, latest): judged
    # by the epoch of the leader that answered against the epochs the reads
    # before it were appended in (stale-end, checkers/lost.py; KIP-207).
    end_offsets_every: float | None = setting(
        None, "About every S seconds, a consumer asks every partition's end (end-offsets) "
        "during the main phase.", metavar="S", default_text="never")
    transactions: bool = setting(
        False, "Producers write in transactions (KIP-98): each operation is one transaction "
        "over 1 to 3 partitions, committed or aborted.")
    abort_probability: float = setting(
        0.25, "With --transactions, the share of transactions the producer aborts.")
    transaction_timeout_ms: int = setting(
        10000, "With --transactions, transaction.timeout.ms: how long the coordinator lets a "
        "transaction stay open before it aborts it.")
    # KAFKA-6119: a transaction that outlives its timeout mid-way. The
    # coordinator aborts it; the producer, unaware, sends the rest and
    # commits, which a correct coordinator refuses (the abort bumped the
    # epoch) and a buggy one accepts as a new transaction without the first half.
    transaction_stall_probability: float = setting(
        0.0, "With --transactions, the share of transactions that stall half-way, after "
        "their first partitions' records are sent, for the transaction timeout plus one "
        "abort sweep (10 s, Kafka's default) and 1 s, then send to other partitions and "
        "commit (never abort).")
    # KIP-447's exactly-once pipeline, as Kafka's TransactionalMessageCopier
    # runs it in Kafka's own transactions system test.
    pipeline: bool = setting(
        False, "With --transactions, every other consumer slot runs a consume-transform-"
        "produce pipeline instead: a member of one group that reads the topics, writes each "
        "value it read to an output topic (kchaos-o0, ...) in one transaction with the "
        "group's offsets, and after an abort rewinds to the group's committed offsets.")
    client_settings: ClientSettings = setting(default_factory=ClientSettings)
    op_timeout: float = setting(15.0, "A send or poll never waits longer.", cli=False)
    poll_timeout: float = setting(0.1, "A poll returns what arrived by then.", cli=False)

    def transaction_expiry_s(self) -> float:
        """Seconds after its first partition by which a coordinator keeping
        Kafka's default sweep interval has aborted an open transaction."""
        return self.transaction_timeout_ms / 1000 + ABORT_SWEEP_S

    def transaction_stall_s(self) -> float:
        """How long a stalled transaction waits half-way, in seconds."""
        return self.transaction_expiry_s() + STALL_MARGIN_S

    def topic_names(self, token: str = "") -> list[str]:
        return [f"kchaos-t{n}{token}" for n in range(self.topics)]

    def output_topic_names(self, token: str = "") -> list[str]:
        """The pipeline's output topics, one per topic (none without --pipeline)."""
        return [f"kchaos-o{n}{token}" for n in range(self.topics)] if self.pipeline else []

    def group_names(self, token: str = "") -> list[str]:
        return [f"kchaos-g{n}{token}" for n in range(self.groups)]

    def problems(self) -> list[tuple[str, str]]:
        """(field, why) for every value that cannot run."""
        found = []
        for name in ("topics", "partitions", "replication_factor", "groups",
                     "records_per_send"):
            if getattr(self, name) < 1:
                found.append((name, "must be at least 1"))
        if self.concurrency < 2:
            found.append(("concurrency", "must be at least 2: a producer and a consumer"))
        if not self.rate > 0:
            found.append(("rate", "must be positive"))
        for name in ("crash_clients_every", "stall_consumers_every", "end_offsets_every"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                found.append((name, "must be positive seconds (or left out: never)"))
        for name in ("abort_probability", "transaction_stall_probability"):
            if not 0 <= getattr(self, name) <= 1:
                found.append((name, "must be between 0 and 1"))
        if self.transaction_stall_probability > 0 and not self.transactions:
            found.append(("transaction_stall_probability", "needs --transactions"))
        if self.transaction_stall_probability > 0 and self.topics * self.partitions < 2:
            found.append(("transaction_stall_probability", "needs at least 2 partitions in "
                          "all: a stalled transaction's two halves go to different ones"))
        if self.transactions and self.client not in TRANSACTIONAL_LIBRARIES:
            found.append(("client", f"{self.client} has no transactions here yet; use one of "
                                    f"{', '.join(TRANSACTIONAL_LIBRARIES)}"))
        if self.pipeline and not self.transactions:
            found.append(("pipeline", "needs --transactions"))
        if self.pipeline and self.client not in PIPELINE_LIBRARIES:
            found.append(("client", f"{self.client} does not commit offsets in transactions "
                                    f"here yet; --pipeline runs on "
                                    f"{', '.join(PIPELINE_LIBRARIES)}"))
        if self.transactions and self.client_settings.isolation_level != "read_committed":
            # aborted-read is an anomaly only for read_committed readers; the
            # checkers do not yet tell read_uncommitted ones apart.
            found.append(("isolation_level", "must be read_committed with --transactions"))
        if self.transactions and not self.client_settings.idempotence:
            found.append(("idempotence", "transactions need the idempotent producer"))
        for item in self.topic_config:
            if "=" not in item or not item.partition("=")[0].strip():
                found.append(("topic_config", f"{item!r} is not KEY=VALUE"))
        return found


@dataclass(frozen=True)
class Target:
    """What one run's workload acts on: where, which topics and groups, and
    the seed of every worker's random stream."""
    bootstrap: str
    topics: tuple[str, ...]
    groups: tuple[str, ...]
    seed: int
    outputs: tuple[str, ...] = ()     # the pipeline's, topic n's output at n

    @property
    def read_topics(self) -> tuple[str, ...]:
        """What the consumers read: the topics and the pipeline's outputs."""
        return self.topics + self.outputs
