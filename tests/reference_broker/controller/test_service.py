"""The controller service: decisions persisted before they are answered,
a restart that resumes from the file (cutting only a torn last line), the
long poll brokers follow the log with, and the metadata log's wire form."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.config import BrokerConfig, parse_settings
from reference_broker.controller import CorruptMetadataRecord, decode
from reference_broker.controller.new_topic import NewTopic
from reference_broker.controller.records import CreateCluster, PartitionState, RegisterBroker
from reference_broker.controller.service import ControllerService
from reference_broker.metadata_batches import decode_metadata_batches, encode_metadata_batch


def service(tmp_path, *settings: str) -> ControllerService:
    config = BrokerConfig(node_id=0, listen=("127.0.0.1", 9093), advertise=("127.0.0.1", 9093),
                          data_dir=tmp_path, settings=parse_settings(list(settings)),
                          process_roles=frozenset({"controller"}))
    opened = ControllerService(config)
    opened.open()
    return opened


def lines(tmp_path) -> list[bytes]:
    return (tmp_path / "metadata.log").read_bytes().splitlines()


def test_every_decision_is_on_disk_before_it_is_answered(tmp_path):
    async def scenario():
        ctl = service(tmp_path)
        assert [type(decode(line)) for line in lines(tmp_path)] == [CreateCluster]
        epoch = await ctl.register(1, "127.0.0.1", 9092)
        assert decode(lines(tmp_path)[-1]) == RegisterBroker(1, "127.0.0.1", 9092, epoch)
        assert await ctl.heartbeat(1, epoch, want_fence=False,
                                   metadata_offset=epoch + 1) == (ErrorCode.none, False)
        [(error, message)] = await ctl.create_topics([NewTopic("t", 2, 1)], False)
        assert (error, message) == (ErrorCode.none, None)
        assert len(lines(tmp_path)) == ctl.end_offset
        return ctl.controller.image.partition("t", 1)
    assert asyncio.run(scenario()).leader == 1


def test_a_restarted_controller_resumes_from_its_file(tmp_path):
    async def first():
        ctl = service(tmp_path)
        epoch = await ctl.register(1, "h", 1)
        await ctl.heartbeat(1, epoch, want_fence=False, metadata_offset=epoch + 1)
        await ctl.create_topics([NewTopic("t", 1, 1)], False)
        return ctl.controller.records_since(0), ctl.cluster_id

    async def second():
        ctl = service(tmp_path)
        # Sessions start afresh: the broker is not fenced at once.
        return ctl.controller.records_since(0), ctl.cluster_id, ctl.controller.expire()

    before, cluster_id = asyncio.run(first())
    after, same_id, expired = asyncio.run(second())
    assert after == before and same_id == cluster_id and expired == []


def test_a_torn_last_line_is_cut_and_a_corrupt_one_elsewhere_stops_the_controller(tmp_path):
    asyncio.run(service(tmp_path).register(1, "h", 1))
    path = tmp_path / "metadata.log"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"type":"FenceBro')     # a crash mid-write
    assert service(tmp_path).end_offset == 2
    assert path.read_bytes() == whole
    path.write_bytes(b"not json\n" + whole)
    with pytest.raises(CorruptMetadataRecord, match="metadata.log, line 1: .*not JSON"):
        service(tmp_path)


def test_topic_names_and_replication_factors_are_checked(tmp_path):
    async def scenario():
        ctl = service(tmp_path)
        await ctl.register(1, "h", 1)
        return await ctl.create_topics([NewTopic("bad name", 1, 1), NewTopic("t", 1, 3),
                                       NewTopic("ok", 1, 1)], False)
    bad, too_many, fenced_only = asyncio.run(scenario())
    assert bad[0] == ErrorCode.invalid_topic_exception and "bad name" in bad[1]
    assert too_many[0] == ErrorCode.invalid_replication_factor
    assert "1 registered broker" in too_many[1]
    # The only broker has not been unfenced yet: nothing can lead.
    assert fenced_only[0] == ErrorCode.invalid_replication_factor


def test_read_log_long_polls_until_the_log_grows(tmp_path):
    async def scenario():
        ctl = service(tmp_path)
        end = ctl.end_offset
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await ctl.read_log(end, 0.05) == []
        waited = loop.time() - started
        reader = asyncio.ensure_future(ctl.read_log(end, 5))
        await asyncio.sleep(0.01)
        assert not reader.done()
        await ctl.register(4, "h", 1)
        grown = await asyncio.wait_for(reader, 1)
        with pytest.raises(ValueError, match="past the log end"):
            await ctl.read_log(end + 5, 0)
        return waited, grown
    waited, grown = asyncio.run(scenario())
    assert waited >= 0.04
    assert grown == [RegisterBroker(4, "h", 1, 1)]


def test_metadata_batches_carry_records_at_their_offsets():
    records = [CreateCluster("c"), RegisterBroker(1, "h", 9092, 1),
               PartitionState("t", 0, (1, 2), (1,), 1, 3, 4)]
    data = encode_metadata_batch(records, 7)
    assert decode_metadata_batches(data, 7) == records
    assert decode_metadata_batches(data, 8) == records[1:]
    assert encode_metadata_batch([], 3) == b"" and decode_metadata_batches(b"", 3) == []
    with pytest.raises(ValueError, match="metadata record at offset 7, expected 5"):
        decode_metadata_batches(data, 5)
