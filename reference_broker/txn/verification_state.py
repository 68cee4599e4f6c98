"""KIP-890 part 1 on a partition: what the leader keeps about a producer
whose first transactional batch there is being verified (Kafka's
VerificationStateEntry, held by ProducerStateManager).

An entry is made when a verification starts, or found if one stands; it
is the guard the batch's append must still find (a marker in between
removes it, so a stale verification cannot append into the next
transaction: the ABA case). It also holds the lowest sequence any batch
needing verification has had at its epoch: while the entry stands, a
batch of that producer with a higher sequence is OUT_OF_ORDER_SEQUENCE,
so a batch whose verification failed with a retriable error is not
overtaken by the next one (VerificationStateEntry's comment: a lower
sequence failing and a higher one written would loop). Any transactional
append of the producer (data or marker) removes it.

Kafka also drops entries never verified with its expired producers
(producer.id.expiration.ms, a day by default); the reference broker keeps
them until the producer's next transactional append or marker.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(eq=False)            # compared by identity: the guard is the entry itself
class Verification:
    lowest_sequence: int
    epoch: int

    def saw(self, sequence: int, epoch: int) -> None:
        """VerificationStateEntry.maybeUpdateLowestSequenceAndEpoch: a lower
        sequence at the same epoch, or any sequence of a higher epoch."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


# Kafka's VerificationGuard.SENTINEL: what a batch carries that no
# verification of this request covers — the partition had the producer's
# transaction open when the request arrived, or this broker did not lead it
# then. It never stands, so if the transaction ended (or leadership came)
# before the append, the batch is refused instead of opening a transaction
# no coordinator knows of (UnifiedLog.analyzeAndValidateProducerState:
# "requestVerificationGuard is the sentinel, so we will throw an error").
UNVERIFIED = Verification(-1, -1)


class Verifications:
    """A partition's verification entries, one per producer id."""

    def __init__(self):
        self._entries: dict[int, Verification] = {}

    def begin(self, producer_id: int, sequence: int, epoch: int) -> Verification:
        """ProducerStateManager.maybeCreateVerificationStateEntry: the
        standing entry (its guard kept) or a new one; either way it has
        seen this batch."""
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = self._entries[producer_id] = Verification(sequence, epoch)
        entry.saw(sequence, epoch)
        return entry

    def stands(self, producer_id: int, guard: object) -> bool:
        return self._entries.get(producer_id) is guard

    def sequence_error(self, producer_id: int, sequence: int) -> str | None:
        """ProducerAppendInfo.checkSequence's first rule: a batch above the
        lowest sequence a standing entry has seen."""
        entry = self._entries.get(producer_id)
        if entry is None or sequence <= entry.lowest_sequence:
            return None
        return (f"out of order sequence number for producer {producer_id}: {sequence} "
                f"(incoming), {entry.lowest_sequence} (earliest seen sequence)")

    def end(self, producer_id: int) -> None:
        """A transactional batch or a marker of the producer was appended."""
        self._entries.pop(producer_id, None)
