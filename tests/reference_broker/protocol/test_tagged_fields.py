"""The fallback reader for tagged fields a schema does not know: skipped
where Kafka's generated readers skip them, at any level, and a tag that
claims more bytes than the frame holds is still an error."""

from __future__ import annotations

import pytest
from kio.schema.metadata.v9.request import MetadataRequest, MetadataRequestTopic
from kio.schema.request_header.v2.header import RequestHeader

from reference_broker.protocol.tagged_fields import read_skipping_unknown_tags

TOPIC_T = MetadataRequest(topics=(MetadataRequestTopic(name="t"),),
                          allow_auto_topic_creation=True,
                          include_cluster_authorized_operations=False,
                          include_topic_authorized_operations=False)


@pytest.mark.parametrize("body", [
    # topics [t (tags: none)], allow 1, cluster ops 0, topic ops 0, tags: none
    "02 0274 00 01 00 00 00",
    # the topic's tags: tag 5 of 2 bytes
    "02 0274 01 0502 01ff 01 00 00 00",
    # the request's tags: tag 5 of 1 byte, then tag 9 of 0 bytes
    "02 0274 00 01 00 00 02 05 01 7f 09 00",
], ids=["none", "in a nested struct", "at the top"])
def test_unknown_tags_are_skipped(body):
    data = bytes.fromhex(body.replace(" ", ""))
    assert read_skipping_unknown_tags(MetadataRequest, data, 0) == (TOPIC_T, len(data))


def test_a_null_array_and_what_follows_the_request():
    # librdkafka's all-topics request as Kafka reads it: three bytes over.
    data = bytes.fromhex("00 000000 01 000000".replace(" ", ""))
    request, used = read_skipping_unknown_tags(MetadataRequest, data, 0)
    assert request.topics is None and not request.allow_auto_topic_creation
    assert used == 7


def test_a_request_header_keeps_its_legacy_client_id():
    data = bytes.fromhex("0003 0009 00000007 0003" + b"abc".hex() + "01 00 01 2a")
    header, used = read_skipping_unknown_tags(RequestHeader, data, 0)
    assert (header.correlation_id, header.client_id, used) == (7, "abc", len(data))


def test_a_tag_longer_than_the_frame_is_an_error():
    data = bytes.fromhex("02 0274 00 01 00 00 01 05 09".replace(" ", ""))
    with pytest.raises(ValueError, match="runs past the frame"):
        read_skipping_unknown_tags(MetadataRequest, data, 0)
