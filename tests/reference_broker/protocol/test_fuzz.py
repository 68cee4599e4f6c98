"""Hypothesis fuzzing of request frames: random bytes, any request kio
can encode with arbitrary field values, valid requests with bytes flipped,
inserted or deleted, and honest bodies behind lying size prefixes — fed in
chunks of any size, followed by a well-behaved ApiVersions request.

The property (docs/broker.md: the broker never dies of input): nothing escapes
the connection (no exception in its worker, none reported to the event
loop, no handler crash in the broker's log); every byte written back is a
well-formed response to one of the frames, in order, decodable with the
schema of its request; a size out of range closes the connection; a
follow-up request that is complete is answered unless the connection was
closed (or an earlier frame is a Fetch long-poll legitimately waiting);
and afterwards a fresh connection still gets correct ApiVersions and
Metadata answers.
"""

from __future__ import annotations

import asyncio
import struct
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_reader

from tests.reference_broker.protocol import entities
from tests.reference_broker.protocol.frame_strategies import (
    lying_prefixes, mutated_requests, requests,
)
from tests.reference_broker.protocol.wire import (
    TIMEOUT, decode_response, encode_request, open_node, response_schema, run, settle,
    split_frames,
)
from tests.reference_broker.record_batches import values_batch

# A broker per example: on tmpfs its fsyncs are free (this is about framing,
# not durability).
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None
MAX_REQUEST = 4096  # socket.request.max.bytes, small so that lies can exceed it
FUZZ_SETTINGS = (f"socket.request.max.bytes={MAX_REQUEST}", "offsets.topic.num.partitions=1")
FOLLOW_UP_ID = 0x5EEDF00D
FOLLOW_UP = encode_request(entities.api_versions(), FOLLOW_UP_ID)
# A Fetch that may wait this long is allowed to still be waiting.
LONG_POLL = timedelta(seconds=1)


@dataclass
class Carved:
    """What a correct Kafka framer makes of a byte stream."""
    frames: list[bytes]
    size_out_of_range: bool   # a size < header or > socket.request.max.bytes
    complete: bool            # the stream ends exactly at a frame boundary


def carve(stream: bytes) -> Carved:
    frames, position = [], 0
    while len(stream) - position >= 4:
        (size,) = struct.unpack_from(">i", stream, position)
        if not 8 <= size <= MAX_REQUEST:
            return Carved(frames, True, False)
        if len(stream) - position - 4 < size:
            break
        frames.append(stream[position + 4:position + 4 + size])
        position += 4 + size
    return Carved(frames, False, position == len(stream))


def long_poll(frame: bytes) -> bool:
    """Whether a frame decodes as a Fetch that may wait longer than LONG_POLL."""
    key, version = struct.unpack_from(">hh", frame)
    if key != entities.FETCH:
        return False
    try:
        schema = load_request_schema(key, version)
        _, used = entity_reader(schema.__header_schema__)(frame, 0)
        request, _ = entity_reader(schema)(frame, used)
    except Exception:  # noqa: BLE001 — undecodable: the broker closes, nothing waits
        return False
    return request.max_wait > LONG_POLL


def check_responses(written: bytes, frames: list[bytes]) -> None:
    """Every response is whole and answers, in order, one of the frames."""
    responses, used = split_frames(written)
    assert used == len(written), f"{len(written) - used} bytes of a partial response"
    remaining = iter(frames)
    for response in responses:
        (correlation_id,) = struct.unpack_from(">i", response)
        for frame in remaining:
            key, version, frame_id = struct.unpack_from(">hhi", frame)
            if frame_id == correlation_id:
                decode_response(response, response_schema(key, version))
                break
        else:
            raise AssertionError(f"response with correlation id {correlation_id} answers "
                                 "no request, or is out of order")


async def feed_and_check(stream: bytes, chunk: int | None) -> None:
    with tempfile.TemporaryDirectory(dir=SCRATCH) as data_dir:
        async with open_node(Path(data_dir), *FUZZ_SETTINGS) as node:
            setup = node.connect()
            await setup.call(entities.create_topics("t"))
            await setup.call(entities.produce("t", 0, values_batch(2)))
            # The coordinator serves every group (one offsets partition), so
            # group requests reach it instead of stopping at NOT_COORDINATOR.
            await setup.call(entities.find_coordinator("g"))
            client = node.connect()
            client.feed(stream + FOLLOW_UP, chunk=chunk)
            carved = carve(stream + FOLLOW_UP)
            must_answer = carved.complete and carved.frames[-1] == FOLLOW_UP[4:] \
                and not any(long_poll(frame) for frame in carved.frames)
            if carved.size_out_of_range:
                await client.closed()
            elif must_answer:
                async with asyncio.timeout(TIMEOUT):
                    while not client.transport.closed and not answered(client.unread()):
                        client.transport.changed.clear()
                        await client.transport.changed.wait()
            else:
                await settle()
            event("closed" if client.transport.closed else
                  "follow-up answered" if answered(client.unread()) else "still open, waiting")
            check_responses(client.unread(), carved.frames)
            client.assert_worker_healthy()
            await node.assert_serves()


def answered(written: bytes) -> bool:
    responses, _ = split_frames(written)
    return any(struct.unpack_from(">i", r)[0] == FOLLOW_UP_ID for r in responses)


FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CHUNKS = st.sampled_from([None, 1, 3, 17])


@FUZZ
@given(stream=st.binary(max_size=200), chunk=CHUNKS)
def test_random_bytes(stream, chunk):
    run(feed_and_check(stream, chunk))


@FUZZ
@given(frame=requests(), chunk=CHUNKS)
def test_any_request_with_arbitrary_values(frame, chunk):
    event(f"api key {struct.unpack_from('>h', frame, 4)[0]}")
    run(feed_and_check(frame, chunk))


@FUZZ
@given(frame=mutated_requests(), chunk=CHUNKS)
def test_mutated_valid_requests(frame, chunk):
    run(feed_and_check(frame, chunk))


@FUZZ
@given(frame=lying_prefixes(MAX_REQUEST), chunk=CHUNKS)
def test_lying_size_prefixes(frame, chunk):
    run(feed_and_check(frame, chunk))
