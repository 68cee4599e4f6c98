"""Transaction scenarios (KIP-98, KIP-890 part 1, KIP-664): one or two
transactional producers on a topic of one or two partitions, driven through
a small model of each producer (initialised or not; its transaction open
or not, with the partitions added to it), so that most moves are ones a
client would make and the rest are the mistakes a broker must refuse:
partitions of unknown topics, batches to partitions not added, from
fenced or unknown epochs and with sequence gaps, EndTxn with no
transaction or a fenced epoch, InitProducerId with invalid timeouts, an
empty id and KIP-360 claims, re-initialisation fencing an open
transaction. Reads in between: Fetch and ListOffsets read_committed and
read_uncommitted, DescribeTransactions, ListTransactions, DescribeProducers.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tests.conformance import requests as rq
from tests.conformance.records import Rec
from tests.conformance.steps_groups import FetchOffsets, FindCoordinator
from tests.conformance.steps_records import Batch, Fetch, ListOffsets, Produce
from tests.conformance.steps_topics import CreateTopics, TopicSpec
from tests.conformance.steps_transactions import (
    UNKNOWN_ID, AddOffsets, AddPartitions, DescribeProducers, DescribeTxns, EndTxn,
    InitTxnProducer, ListTxns, TxnCommitOffsets, TxnProduce,
)
from tests.conformance.strategies import T0

STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "Dead", "NoSuchState")
GROUP = "g0"


def txn_records(draw) -> tuple[Rec, ...]:
    return tuple(Rec(value=draw(st.sampled_from([b"v", b"", None])),
                     key=draw(st.sampled_from([None, b"k"])),
                     timestamp=T0 + draw(st.integers(0, 6)) * 1000)
                 for _ in range(draw(st.integers(1, 3))))


def read(draw, partitions: int, producers: list[str]):
    """A read between writes, none of them compared for what it changed."""
    part = st.sampled_from(range(partitions))
    kind = draw(st.sampled_from(["fetch"] * 3 + ["list"] * 2 + ["describe", "list-txns",
                                                                "producers", "offsets"]))
    if kind == "fetch":
        return Fetch("t0", draw(part), 0, isolation_level=draw(st.sampled_from([0, 1, 1])))
    if kind == "list":
        return ListOffsets("t0", draw(part), draw(st.sampled_from([rq.LATEST] * 3 + [rq.EARLIEST])),
                           isolation_level=draw(st.sampled_from([0, 1, 1])))
    if kind == "describe":
        extra = (UNKNOWN_ID,) if draw(st.integers(0, 3)) == 0 else ()
        return DescribeTxns(tuple(producers) + extra)
    if kind == "list-txns":
        return ListTxns(tuple(draw(st.lists(st.sampled_from(STATES), max_size=2, unique=True))),
                        tuple(draw(st.lists(st.sampled_from(producers + ["zz"]), max_size=1))),
                        draw(st.sampled_from([-1, -1, 3_600_000])))
    if kind == "offsets":       # the group's, maybe pending in a transaction
        return FetchOffsets(GROUP, draw(st.sampled_from([None, (("t0", (0,)),)])),
                            require_stable=draw(st.booleans()))
    extra = (partitions,) if draw(st.integers(0, 4)) == 0 else ()
    return DescribeProducers("t0", tuple(range(partitions)) + extra)


@st.composite
def transaction_scenarios(draw, size: int):
    """Rounds: a producer (initialised first, or re-initialised) adds
    partitions, writes transactional batches, maybe sends offsets, and
    ends its transaction by commit, abort or being fenced, or leaves it
    open while the other producer's round runs; a flaw now and then, and
    reads between the steps."""
    partitions = draw(st.integers(1, 2))
    rf = draw(st.integers(1, size))
    steps = [CreateTopics((TopicSpec("t0", partitions, rf),))]
    producers = ["x0", "x1"][:draw(st.integers(1, 2))]
    if draw(st.booleans()):
        steps.append(FindCoordinator(producers[0], rq.TRANSACTION_KEY))
    inited: set[str] = set()
    open_: dict[str, set] = {}          # producer -> partitions in its open transaction
    all_partitions = [("t0", i) for i in range(partitions)]
    # Hypothesis leans to a sampled list's first element and to small
    # integers: the usual choice comes first.
    rare = st.sampled_from([False] * 7 + [True])

    def maybe_read():
        if draw(st.integers(0, 2)) == 0:
            steps.append(read(draw, partitions, producers))

    def init(p: str) -> None:
        """InitProducerId: a new producer instance (fencing the last one and
        aborting its open transaction), maybe followed by the fenced
        instance naming its old epoch (a zombie: PRODUCER_FENCED); or
        (KIP-360) the producer naming its id and epoch to get the next one —
        with no transaction open maybe again as a retry whose answer was
        lost (naming the epoch before the bump), with one open fencing
        itself; or naming another producer id."""
        timeout = 60000 if not draw(rare) else draw(st.sampled_from([0, -1, 900001, 900000]))
        claims = ["none", "none", "other"]
        if p in inited:
            claims = ["none", "none+old", "current", "other"] + (
                [] if p in open_ else ["current+retry"])
        claim = draw(st.sampled_from(claims)) if p in inited else "none"
        if draw(st.integers(0, 12)) == 0:
            steps.append(InitTxnProducer("!", timeout))         # INVALID_REQUEST
        steps.append(InitTxnProducer(p, timeout, claim.split("+")[0]))
        valid = 0 < timeout <= 900000
        if valid and claim in ("current+retry", "none+old"):
            steps.append(InitTxnProducer(p, timeout, "old"))
        if valid and claim != "other":
            inited.add(p)
            open_.pop(p, None)

    for p in producers:
        if draw(st.integers(0, 5)):
            init(p)
    for _ in range(draw(st.integers(1, 4))):
        p = draw(st.sampled_from(producers))
        if p not in inited and draw(st.integers(0, 3)) or \
                p in inited and p not in open_ and draw(st.integers(0, 3)) == 0:
            init(p)         # the first instance, or a new one between transactions
        if draw(rare):      # a transaction's end with none open, or from another producer id
            steps.append(EndTxn(p, draw(st.booleans()), 0, p in open_))
        wanted = draw(st.lists(st.sampled_from(all_partitions), min_size=1, unique=True))
        flaw = draw(st.sampled_from([None] * 12 + ["unknown-topic", "unknown-partition",
                                                   "internal", "epoch", "pid"]))
        if flaw == "unknown-topic":
            wanted.append(("nx", 0))
        elif flaw == "unknown-partition":
            wanted.append(("t0", partitions))
        elif flaw == "internal":
            wanted.append(("!__consumer_offsets", 0))
        steps.append(AddPartitions(p, tuple(wanted), draw(st.sampled_from([-1, 1]))
                                   if flaw == "epoch" else 0, flaw == "pid"))
        if p in inited and not flaw:
            open_.setdefault(p, set()).update(wanted)
        maybe_read()
        added = sorted(open_.get(p, ()))
        for _ in range(draw(st.integers(1, 3))):
            target = draw(st.sampled_from(added)) if added and not draw(rare) \
                else draw(st.sampled_from(all_partitions))
            epoch = 0 if not draw(rare) else draw(st.sampled_from([-1, 1]))
            steps.append(TxnProduce(p, target[0], target[1], txn_records(draw), epoch,
                                    draw(st.sampled_from(["next"] * 12 + ["gap"])),
                                    draw(st.sampled_from([True] * 24 + [False]))))
            if draw(st.integers(0, 4)) == 0:    # records of no transaction in between
                steps.append(Produce("t0", target[1], Batch(txn_records(draw)), -1))
            maybe_read()
        if draw(st.integers(0, 4)) == 0:
            epoch = 0 if not draw(rare) else -1
            steps.append(AddOffsets(p, GROUP, epoch))
            steps.append(TxnCommitOffsets(p, GROUP, (("t0", 0, draw(st.integers(0, 5))),)))
            if p in inited and epoch == 0:      # the group's partition is in it
                open_.setdefault(p, set())
        end = draw(st.sampled_from(["commit"] * 3 + ["abort"] * 2 + ["fence", "open"]))
        if end in ("commit", "abort"):
            epoch = 0 if not draw(rare) else -1
            steps.append(EndTxn(p, end == "commit", epoch))
            if epoch == 0:
                open_.pop(p, None)
        elif end == "fence":            # a new instance of the producer
            init(p)
            if draw(st.booleans()):     # the old one, fenced, goes on
                steps.append(draw(st.sampled_from([
                    TxnProduce(p, "t0", 0, txn_records(draw), -1),
                    EndTxn(p, True, -1), AddPartitions(p, (("t0", 0),), -1)])))
        for _ in range(draw(st.integers(0, 2))):
            steps.append(read(draw, partitions, producers))
    for i in range(partitions):
        steps.append(Fetch("t0", i, 0, isolation_level=rq.READ_COMMITTED))
    steps.append(DescribeTxns(tuple(producers)))
    return steps
