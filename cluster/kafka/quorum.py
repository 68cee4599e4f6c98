"""Which node is KRaft's active controller, asked the way Kafka's own
Admin.describeMetadataQuorum asks it: DescribeQuorum (API 55, KIP-595)
for `__cluster_metadata`-0, sent to a broker, which forwards it to the
controller quorum (KIP-836). Metadata cannot tell: in KRaft mode its
controller id is a random live broker, since clients never talk to the
controllers.

One small request through kio's codecs, so any KRaft system answers it;
a system without the API (or without KRaft) answers nothing useful, and
the lookup says None.
"""

from __future__ import annotations

import io
import socket
import struct

from kio.schema.describe_quorum.v0.request import (DescribeQuorumRequest, PartitionData,
                                                   TopicData)
from kio.schema.describe_quorum.v0.response import DescribeQuorumResponse
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

METADATA_TOPIC = "__cluster_metadata"
_SIZE = struct.Struct(">i")
_MAX_RESPONSE = 1 << 20


def active_controller(bootstrap: str, timeout: float = 5.0) -> int | None:
    """The node id of the active controller, by the first broker of
    bootstrap (`host:port,...`) that answers; None when none knows."""
    for server in filter(None, bootstrap.split(",")):
        host, _, port = server.rpartition(":")
        try:
            leader = _ask(host, int(port), timeout)
        except (OSError, ValueError, EOFError):
            continue
        if leader is not None:
            return leader
    return None


def _ask(host: str, port: int, timeout: float) -> int | None:
    request = DescribeQuorumRequest(topics=(TopicData(
        topic_name=METADATA_TOPIC, partitions=(PartitionData(partition_index=i32(0)),)),))
    header = request.__header_schema__(request_api_key=request.__api_key__,
                                       request_api_version=request.__version__,
                                       correlation_id=i32(1), client_id="kchaos-nemesis")
    frame = io.BytesIO()
    entity_writer(type(header))(frame, header)
    entity_writer(type(request))(frame, request)
    body = frame.getvalue()
    with socket.create_connection((host, port), timeout=timeout) as connection:
        connection.sendall(_SIZE.pack(len(body)) + body)
        size = _SIZE.unpack(_read(connection, _SIZE.size))[0]
        if not 0 < size <= _MAX_RESPONSE:
            raise ValueError(f"a response of {size} bytes")
        answer = _read(connection, size)
    response_header, used = entity_reader(DescribeQuorumResponse.__header_schema__)(answer, 0)
    response, _ = entity_reader(DescribeQuorumResponse)(answer, used)
    if response.error_code != ErrorCode.none or not response.topics:
        return None
    partitions = response.topics[0].partitions
    if not partitions or partitions[0].error_code != ErrorCode.none or partitions[0].leader_id < 0:
        return None
    return int(partitions[0].leader_id)


def _read(connection: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise EOFError("the broker closed the connection")
        data += chunk
    return bytes(data)
