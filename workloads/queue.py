"""The queue workload: producers send unique values, consumers read them in
`assign` and `subscribe` modes and commit what they processed — every
operation recorded in the history as an invocation and its completion.

Workers are threads, one client each, one logical process each
(docs/history.md): after an `info` completion or a `crash`, the worker
closes its client and goes on as a new process, `process + concurrency`,
with a new client — so `process % concurrency` is the worker's slot.

What a seed guarantees: every worker slot draws its decisions from its own
random stream, seeded by (seed, slot). A producer slot sends the same
sequence of (topic, partition, value); a consumer slot makes the same
sequence of choices (poll, commit, committed, crash). What the cluster
answers — offsets, records read, errors — and the timing are not the
seed's to decide, and where an operation depends on them (a commit of what
was read) its content follows the answers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from history_analysis.history import schema as h
from history_analysis.history.writer import HistoryWriter
from workloads.clients import (Outcome, make_consumer, make_producer,
                               make_transactional_producer)
from workloads.clients.base import Stall, offsets_value, partitions_value
from workloads.pipeline import PIPELINE_GROUP, PipelineWorker
from workloads.queue_config import QueueConfig, Target
from workloads.worker import Stats, Worker, close_quietly

log = logging.getLogger("workloads.queue")

VALUE_SLOT_SHIFT = 40      # value = slot << 40 | n: unique across the run, 64 bits


class ProducerWorker(Worker):
    """Sends unique values; with `transactions`, each operation is one
    transaction over 1 to 3 partitions, committed or, with
    `abort_probability`, aborted (f `txn`). With
    `transaction_stall_probability` a transaction over 2 or 3 partitions
    stalls past its timeout after the first one's records (KAFKA-6119)."""

    def run(self) -> None:
        config, target = self.config, self.target
        # Hot partitions: Zipf weights 1, 1/2, 1/3, ... over a seeded order.
        order = list(range(config.partitions))
        self.rng.shuffle(order)
        weights = [1.0 / (rank + 1) for rank in range(config.partitions)]
        client = self._client()
        sent = 0
        try:
            for _ in self.paced():
                if self.crash_now():
                    client = self._crash(client)
                    continue
                # Drawn only when asked for, so other runs' seeds keep their streams.
                stalls = config.transaction_stall_probability > 0 and \
                    self.rng.random() < config.transaction_stall_probability
                if stalls:      # its halves go to different partitions
                    anywhere = [(t, p) for t in target.topics for p in order]
                    places = self.rng.sample(anywhere, min(self.rng.randint(2, 3),
                                                           len(anywhere)))
                else:
                    places = [(self.rng.choice(target.topics),
                               self.rng.choices(order, weights)[0])
                              for _ in range(self.rng.randint(1, 3) if config.transactions else 1)]
                # Several records of one op reach the same partition back to
                # back: the client pipelines them as batches in flight
                # together, up to max.in.flight (KIP-98 deduplicates 5).
                sends = []
                for topic, partition in dict.fromkeys(places):
                    sends += [(topic, partition, self.slot << VALUE_SLOT_SHIFT | n)
                              for n in range(sent, sent + config.records_per_send)]
                    sent += config.records_per_send
                asked = [h.SEND_ASKED(topic=t, partition=p, value=v, offset=None)
                         for t, p, v in sends]
                if config.transactions:
                    # A stalled transaction always asks to commit: its abort shows nothing.
                    commit = self.rng.random() >= config.abort_probability or stalls
                    # The first place's records, then the stall (the stop ends it).
                    stall = Stall(config.records_per_send, lambda: self.stop.wait(
                        config.transaction_stall_s())) if stalls else None
                    outcome = self.call("txn", h.invocation("txn", sends=asked, polls=False),
                                        lambda: client.transaction(sends, commit,
                                                                   config.op_timeout,
                                                                   self.history.now, stall))
                else:
                    outcome = self.call("send", h.invocation("send", sends=asked),
                                        lambda: client.send(sends, config.op_timeout))
                if outcome.type == "info":
                    close_quietly(client)
                    self.next_process()
                    client = self._client()
                elif config.transactions and not client.usable:
                    close_quietly(client)   # fatal after a definite end: same process
                    client = self._client()
        finally:
            close_quietly(client)

    def _client(self):
        client_id = f"kchaos-p{self.process}"
        if not self.config.transactions:
            return make_producer(self.config.client, self.target.bootstrap,
                                 self.config.client_settings, client_id)
        # One transactional.id per slot, kept across processes: a new
        # client's InitProducerId fences whatever the old one left open.
        return make_transactional_producer(
            self.config.client, self.target.bootstrap, self.config.client_settings, client_id,
            f"{self.target.topics[0]}-tx{self.slot}", self.config.transaction_timeout_ms)

    def _crash(self, client):
        self.invoke("crash", h.invocation("crash"))
        close_quietly(client)
        self.complete("crash", Outcome("info", h.completion("crash")))
        self.next_process()
        return self._client()


class ConsumerWorker(Worker):
    """Assign mode: all partitions, its own group for commits (a simple
    consumer: commits without membership). Subscribe mode: a member of one
    of the groups, committing only partitions it owns."""

    def __init__(self, *args, mode: str, group: str, **kw):
        super().__init__(*args, **kw)
        self.mode = mode
        self.group = group
        self.owned: set[tuple[str, int]] = set()
        self.positions: dict[tuple[str, int], int] = {}   # next offset to consume, as read
        self.committed_positions: dict[tuple[str, int], int] = {}
        # Whether the group has an `ok` commit: until it has, a new process
        # starts from the beginning, not where auto.offset.reset would put
        # it ("latest" would skip what the group never read).
        self.group_committed = False

    def run(self) -> None:
        client = self._start(seek_to_beginning=True)
        try:
            for _ in self.paced():
                if self.crash_now():
                    self.invoke("crash", h.invocation("crash"))
                    close_quietly(client)
                    self.complete("crash", Outcome("info", h.completion("crash")))
                    self.next_process()
                    client = self._start(seek_to_beginning=not self.group_committed)
                    continue
                if self.mode == "subscribe" and self._now(self.config.stall_consumers_every):
                    # Slow processing of what it read, then its commit.
                    if self.stop.wait(1.5 * self.config.client_settings.max_poll_interval_ms / 1000):
                        return
                    outcome = self._commit(client)
                elif self._now(self.config.end_offsets_every):
                    outcome = self._end_offsets(client)
                elif (choice := self.rng.random()) < 0.75:
                    outcome = self._poll(client)
                elif choice < 0.9:
                    outcome = self._commit(client)
                else:
                    outcome = self._committed(client)
                if outcome.type == "info":
                    close_quietly(client)
                    self.next_process()
                    client = self._start(seek_to_beginning=not self.group_committed)
        finally:
            close_quietly(client)

    def _all_partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for t in self.target.read_topics for p in range(self.config.partitions)]

    def _start(self, seek_to_beginning: bool):
        """A new client for a new process: assign (from the beginning the
        first time, else from the committed offsets) or subscribe. A start
        that ends `info` (its client's JVM killed, say) ends its process
        too, and the next one starts, one pacing interval later, until the
        stop."""
        return self.started(lambda: self._start_once(seek_to_beginning))

    def _start_once(self, seek_to_beginning: bool):
        config, target = self.config, self.target
        client = make_consumer(config.client, target.bootstrap, config.client_settings,
                               f"kchaos-c{self.process}", self.group)
        self.owned, self.positions, self.committed_positions = set(), {}, {}
        if self.mode == "assign":
            partitions = self._all_partitions()
            outcome = self.call("assign", h.invocation(
                "assign", partitions=partitions_value(partitions),
                seek_to_beginning=seek_to_beginning),
                lambda: client.assign(partitions, seek_to_beginning))
            self.owned = set(partitions)
        else:
            outcome = self.call("subscribe", h.invocation("subscribe", group=self.group,
                                                          topics=list(target.read_topics)),
                                lambda: client.subscribe(self.group, list(target.read_topics)))
        return client, outcome

    def _poll(self, client) -> Outcome:
        outcome = self.call("poll", h.invocation("poll"),
                            lambda: client.poll(self.config.poll_timeout))
        for change in outcome.value.get("rebalances", ()):
            partitions = {(p["topic"], p["partition"]) for p in change["partitions"]}
            if change["kind"] == "assigned":
                self.owned |= partitions
            elif change["kind"] in ("revoked", "lost"):     # a client's reset keeps them
                self.owned -= partitions
                for tp in partitions:
                    self.positions.pop(tp, None)
                    self.committed_positions.pop(tp, None)
        for read in outcome.value.get("reads", ()):
            self.positions[(read["topic"], read["partition"])] = read["offset"] + 1
        return outcome

    def _commit(self, client) -> Outcome:
        """Commit after processing: the next offset of every owned partition
        read since its last commit. With nothing new, commit what was
        committed before (the same offsets again) — the op still happens."""
        offsets = [(t, p, offset) for (t, p), offset in sorted(self.positions.items())
                   if (t, p) in self.owned]
        if not offsets:
            return self._committed(client)
        outcome = self.call("commit", h.invocation("commit", group=self.group,
                                                   offsets=offsets_value(offsets)),
            lambda: client.commit(self.group, offsets))
        if outcome.type == "ok":
            self.committed_positions.update({(t, p): o for t, p, o in offsets})
            self.group_committed = True
        return outcome

    def _end_offsets(self, client) -> Outcome:
        partitions = self._all_partitions()
        return self.call("end-offsets", h.invocation("end-offsets",
                                                     partitions=partitions_value(partitions)),
                         lambda: client.end_offsets(partitions, self.config.op_timeout))

    def _committed(self, client) -> Outcome:
        partitions = sorted(self.owned) or self._all_partitions()
        return self.call("committed", h.invocation("committed", group=self.group,
                                                   partitions=partitions_value(partitions)),
            lambda: client.committed(self.group, partitions, self.config.op_timeout))


def consumer_plan(config: QueueConfig, groups: Sequence[str]) -> list[tuple[int, str, str]]:
    """(slot, mode, group) of every consumer slot. Slots alternate producer,
    consumer, producer, ... so both kinds exist at any concurrency ≥ 2;
    `mixed` alternates assign and subscribe among the consumers, and the
    subscribers spread over the groups. With `pipeline`, every other
    consumer slot, the first included, is a pipeline of PIPELINE_GROUP
    (mode `pipeline`) and the rest consumers as above."""
    consumer_slots = [slot for slot in range(config.concurrency) if slot % 2 == 1]
    pipelines = consumer_slots[::2] if config.pipeline else []
    plan = [(slot, "pipeline", PIPELINE_GROUP) for slot in pipelines]
    for n, slot in enumerate(s for s in consumer_slots if s not in pipelines):
        mode = config.consumer_mode if config.consumer_mode != "mixed" \
            else ("subscribe" if n % 2 == 0 else "assign")
        group = groups[(n // 2 if config.consumer_mode == "mixed" else n)
                       % len(groups)] if mode == "subscribe" \
            else f"kchaos-a{slot}"
        plan.append((slot, mode, group))
    return sorted(plan)


def run_queue(config: QueueConfig, target: Target, history: HistoryWriter, duration: float,
              stats: Stats | None = None) -> Stats:
    """Run every worker for `duration` seconds; each finishes its operation
    in flight (bounded by the client timeouts) before the call returns."""
    stats = stats or Stats()
    stop = threading.Event()
    workers: list[Worker] = [ProducerWorker(slot, config, target, history, stats, stop)
                             for slot in range(0, config.concurrency, 2)]
    workers += [PipelineWorker(slot, config, target, history, stats, stop, group=group)
                if mode == "pipeline" else
                ConsumerWorker(slot, config, target, history, stats, stop, mode=mode,
                               group=group)
                for slot, mode, group in consumer_plan(config, target.groups)]
    errors: list[BaseException] = []

    def guarded(worker: Worker) -> None:
        try:
            worker.run()
        except BaseException as e:  # noqa: BLE001 — reported after the join
            log.exception("worker %d failed", worker.slot)
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(w,), name=f"worker-{w.slot}", daemon=True)
               for w in workers]
    for thread in threads:
        thread.start()
    try:
        stop.wait(duration)
    finally:
        stop.set()
        deadline = time.monotonic() + config.op_timeout + 30
        for thread in threads:
            thread.join(max(0.1, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        raise RuntimeError(f"workers {stuck} did not stop within the client timeouts")
    if errors:
        raise RuntimeError(f"{len(errors)} worker(s) failed; the first: {errors[0]!r}") \
            from errors[0]
    return stats
