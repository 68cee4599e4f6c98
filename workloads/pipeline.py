"""The consume-transform-produce pipeline (`--pipeline`; KIP-98, KIP-447):
the exactly-once loop Kafka Streams and most pipelines rest on, run as
Kafka's own transactions system test runs its TransactionalMessageCopier.

A pipeline slot is a member of one group (PIPELINE_GROUP) subscribed to the
run's topics, with a transactional producer whose transactional.id is kept
across its processes. Each operation polls (a `poll` op, read_committed);
when the poll read something, one `txn` op writes each value read, as
`value | PIPELINE_OUTPUT`, to the same partition of the topic's output
topic, commits the group's next offsets inside the transaction with the
consumer's group metadata (so a zombie, a member the group has replaced,
is fenced: KIP-447), then commits or, at `abort_probability`, aborts.

After a `fail` (aborted) transaction the consumer is already past what it
read: the slot asks the group's committed offsets (a `committed` op) and
rewinds there, which the next poll reports as `reset`s; where it cannot
learn them, or after an `info`, the slot goes on as a new process whose new
member resumes from the group's committed offsets. So every input a
committed offset covers is in the output exactly once (`eos-duplicate`,
`eos-missing`: checkers/pipeline.py).
"""

from __future__ import annotations

import logging

from history_analysis.history import schema as h
from workloads.clients import Outcome, make_consumer, make_transactional_producer
from workloads.clients.base import Consumed, PipelineConsumer, partitions_value
from workloads.worker import Worker, close_quietly

log = logging.getLogger("workloads.pipeline")

PIPELINE_GROUP = "kchaos-pipe"


class PipelineWorker(Worker):

    def __init__(self, *args, group: str = PIPELINE_GROUP, **kw):
        super().__init__(*args, **kw)
        self.group = group
        self.output = dict(zip(self.target.topics, self.target.outputs))

    def run(self) -> None:
        consumer, producer = self._start()
        try:
            for _ in self.paced():
                if self.crash_now():
                    self.invoke("crash", h.invocation("crash"))
                    self._close(consumer, producer)
                    self.complete("crash", Outcome("info", h.completion("crash")))
                    consumer, producer = self._restart(None, None)
                    continue
                polled = self.call("poll", h.invocation("poll"),
                                   lambda: consumer.poll(self.config.poll_timeout))
                carries_on = polled.type != "info"
                if carries_on and polled.value.get("reads"):
                    carries_on = self._transform(consumer, producer, polled.value["reads"])
                if not carries_on:
                    consumer, producer = self._restart(consumer, producer)
                elif not producer.usable:
                    close_quietly(producer)     # fatal after a definite end: same process
                    producer = self._producer()
        finally:
            self._close(consumer, producer)

    def _transform(self, consumer: PipelineConsumer, producer, reads: list[dict]) -> bool:
        """One transaction of what a poll read; False when the slot must go
        on as a new process."""
        sends = [(self.output[r["topic"]], r["partition"], r["value"] | h.PIPELINE_OUTPUT)
                 for r in reads if r.get("value") is not None]
        ends: dict[tuple[str, int], int] = {}
        for r in reads:     # the next offset to consume (Kafka's convention)
            ends[(r["topic"], r["partition"])] = max(ends.get((r["topic"], r["partition"]), 0),
                                                     r["offset"] + 1)
        consumed = Consumed(self.group, consumer.group_metadata(),
                            [(t, p, o) for (t, p), o in sorted(ends.items())])
        commit = self.rng.random() >= self.config.abort_probability
        asked = [h.SEND_ASKED(topic=t, partition=p, value=v, offset=None) for t, p, v in sends]
        outcome = self.call("txn", h.invocation("txn", sends=asked, polls=False,
                                                **consumed.value()),
                            lambda: producer.transaction(sends, commit, self.config.op_timeout,
                                                         self.history.now, consumed=consumed))
        if outcome.type == "fail":
            return self._rewind(consumer, list(ends))
        return outcome.type == "ok"

    def _rewind(self, consumer: PipelineConsumer, partitions: list[tuple[str, int]]) -> bool:
        """Back to the group's committed offsets of what the aborted
        transaction read (as Kafka's copier's resetToLastCommittedPositions)."""
        asked = self.call("committed", h.invocation("committed", group=self.group,
                                                    partitions=partitions_value(partitions)),
                          lambda: consumer.committed(self.group, partitions,
                                                     self.config.op_timeout))
        if asked.type != "ok":
            return False
        try:
            consumer.rewind([(o["topic"], o["partition"], o["offset"])
                             for o in asked.value["offsets"]])
        except Exception as e:  # noqa: BLE001 — a partition no longer ours, say
            log.info("process %d: could not rewind (%r); going on as a new process",
                     self.process, e)
            return False
        return True

    def _restart(self, consumer, producer):
        if consumer is not None:
            self._close(consumer, producer)
        self.next_process()
        return self._start()

    def _start(self):
        """A new member and a new producer of the slot's transactional.id
        (whose InitProducerId fences what the last one left open). A
        subscribe that ends `info` ends its process too."""
        def subscribed():
            consumer = make_consumer(self.config.client, self.target.bootstrap,
                                     self.config.client_settings, f"kchaos-c{self.process}",
                                     self.group)
            topics = list(self.target.topics)
            return consumer, self.call("subscribe", h.invocation(
                "subscribe", group=self.group, topics=topics),
                lambda: consumer.subscribe(self.group, topics))
        return self.started(subscribed), self._producer()

    def _producer(self):
        return make_transactional_producer(
            self.config.client, self.target.bootstrap, self.config.client_settings,
            f"kchaos-p{self.process}", f"{self.target.topics[0]}-pipe{self.slot}",
            self.config.transaction_timeout_ms)

    @staticmethod
    def _close(consumer, producer) -> None:
        close_quietly(producer)
        close_quietly(consumer)
