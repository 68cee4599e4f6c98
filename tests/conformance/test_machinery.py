"""The conformance suite's own parts, without clusters: the comparison
reports what differs and accepts a divergence only for the pair of values
it names; the divergences and normalisations are the ones docs/broker.md
lists; record batches encode as real clients read them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conformance import divergences
from tests.conformance.base import NORMALISATIONS
from tests.conformance.compare import Outcome, compare, differences
from tests.conformance.divergences import MISSING
from tests.conformance.plain import keyed
from tests.conformance.records import GZIP, TRANSACTIONAL, Rec, decode, encode
from tests.conformance.steps_records import Fetch
from tests.conformance.steps_topics import AlterConfigs, CreateTopics, TopicSpec

pytestmark = pytest.mark.conformance

DOCS = Path(__file__).resolve().parents[2] / "docs" / "broker.md"


def test_differences_are_found_at_every_leaf_and_for_missing_keys():
    a = {"x": 1, "l": [1, {"y": 2}], "only_a": 0}
    b = {"x": 1, "l": [1, {"y": 3}], "only_b": 0}
    assert differences(a, b) == [("l.1.y", 2, 3), ("only_a", 0, MISSING),
                                 ("only_b", MISSING, 0)]
    assert differences([1, 2], [1, 2, 3]) == [("", [1, 2], [1, 2, 3])]


def test_keyed_keeps_a_repeated_key_apart():
    assert list(keyed([{"n": "a"}, {"n": "b"}, {"n": "a"}], "n")) == ["a", "b", "a#2"]


def _create(configs, validate_only=False):
    return CreateTopics((TopicSpec("t0", 1, 1, None, configs),), validate_only)


def _answer(error, message=None):
    return {"topics": {"p-t0": {"name": "p-t0", "error_code": error, "error_message": message}}}


def test_a_restricted_config_refused_by_the_reference_broker_is_accepted_by_name():
    outcome = Outcome()
    compare("CreateTopics", _answer("invalid_config", "<text>"), _answer("none"),
            _create((("retention.ms", "1000"),)), outcome)
    assert not outcome.unexplained
    assert outcome.applied == {"restricted-topic-configs": 2}


@pytest.mark.parametrize("configs, ref, kafka", [
    ((("min.insync.replicas", "2"),), "invalid_config", "none"),       # not a restriction
    ((("retention.ms", "-1"),), "invalid_config", "none"),              # a value it honours
    ((("retention.ms", "1000"),), "none", "invalid_config"),            # the other way round
    ((("retention.ms", "1000"),), "invalid_config", "unknown_server_error"),
])
def test_a_divergence_accepts_only_the_pair_it_names(configs, ref, kafka):
    outcome = Outcome()
    compare("CreateTopics", _answer(ref), _answer(kafka), _create(configs), outcome)
    assert [(d.path, d.reference, d.kafka) for d in outcome.unexplained] == \
        [("topics.p-t0.error_code", ref, kafka)]


def test_a_difference_on_another_api_or_field_is_never_accepted():
    outcome = Outcome()
    step = AlterConfigs(((2, "t0", (("retention.ms", 0, "1000"),)),), validate_only=True)
    compare("IncrementalAlterConfigs",
            {"responses": [{"error_code": "invalid_config", "resource_name": "a"}]},
            {"responses": [{"error_code": "none", "resource_name": "b"}]}, step, outcome)
    assert [d.path for d in outcome.unexplained] == ["responses.0.resource_name"]


def test_out_of_range_offsets_are_accepted_only_beside_offset_out_of_range():
    def answer(error, hw):
        return {"responses": {"p.t0": {0: {"error_code": error, "high_watermark": hw}}}}
    ok, bad = Outcome(), Outcome()
    compare("Fetch", answer("offset_out_of_range", 5), answer("offset_out_of_range", -1),
            Fetch("t0", 0, 9), ok)
    compare("Fetch", answer("none", 5), answer("none", -1), Fetch("t0", 0, 9), bad)
    assert (ok.unexplained, ok.applied) == ([], {"offset-out-of-range-tells-offsets": 1})
    assert [d.path for d in bad.unexplained] == ["responses.p.t0.0.high_watermark"]


def _listed(section: str) -> list[str]:
    text = DOCS.read_text()
    body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z0-9.-]+)` \|", body, re.MULTILINE)


def test_docs_list_every_accepted_divergence_and_nothing_else():
    assert sorted(_listed("Known divergences from Apache Kafka")) == \
        sorted(divergences.names())


def test_docs_list_every_normalisation():
    assert sorted(_listed("Conformance with Apache Kafka")) == sorted(NORMALISATIONS)


@pytest.mark.parametrize("compression", [0, GZIP])
def test_batches_decode_as_a_client_reads_them(compression):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.default_records import DefaultRecordBatch
    records = [Rec(b"v1", b"k", 1_700_000_000_123, (("h", b"x"),)),
               Rec(None, None, 1_700_000_000_001)]
    data = encode(records, producer_id=7, producer_epoch=1, base_sequence=4,
                  compression=compression)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 4)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch] == [
        (0, 1_700_000_000_123, b"k", b"v1", [("h", b"x")]), (1, 1_700_000_000_001, None, None, [])]
    [decoded] = decode(data)
    assert [(r["offset"], r["timestamp"], r["key"], r["value"]) for r in decoded["records"]] == \
        [(0, 1_700_000_000_123, b"k", b"v1"), (1, 1_700_000_000_001, None, None)]
    with pytest.raises(ValueError, match="CRC"):
        decode(data[:-1] + bytes([data[-1] ^ 1]))


def test_aborted_transactions_are_accepted_only_beyond_the_last_stable_offset():
    def answer(aborted, lso=4):
        return {"responses": {"p-t0": {0: {"last_stable_offset": lso,
                                           "aborted_transactions": aborted}}}}
    early, late = {"producer_id": "x0", "first_offset": 1}, {"producer_id": "x1", "first_offset": 6}
    step = Fetch("t0", 0, 0, isolation_level=1)
    ok, bad = Outcome(), Outcome()
    compare("Fetch", answer([early]), answer([early, late]), step, ok)
    compare("Fetch", answer([]), answer([early, late]), step, bad)
    assert (ok.unexplained, ok.applied) == ([], {"aborted-transactions-beyond-read": 1})
    assert [d.path for d in bad.unexplained] == ["responses.p-t0.0.aborted_transactions"]


def test_a_transaction_state_with_no_start_time_decodes():
    import io
    from datetime import UTC, datetime, timedelta

    from kio.schema.describe_transactions.v0 import response as kio_response
    from kio.schema.errors import ErrorCode
    from kio.serial import entity_reader, entity_writer

    from tests.conformance.lenient import DescribeTransactionsResponse

    state = kio_response.TransactionState(
        error_code=ErrorCode.none, transactional_id="x", transaction_state="Empty",
        transaction_timeout=timedelta(seconds=60),
        transaction_start_time=datetime(1970, 1, 1, tzinfo=UTC) - timedelta(milliseconds=1),
        producer_id=7, producer_epoch=0, topics=())
    response = kio_response.DescribeTransactionsResponse(throttle_time=timedelta(0),
                                                         transaction_states=(state,))
    buffer = io.BytesIO()
    entity_writer(type(response))(buffer, response)
    decoded, _ = entity_reader(DescribeTransactionsResponse)(buffer.getvalue(), 0)
    assert decoded.transaction_states[0].transaction_start_time == -1


def test_a_transactional_batch_carries_its_flag():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.default_records import DefaultRecordBatch
    data = encode([Rec(b"v", None, 1_700_000_000_000)], producer_id=7, producer_epoch=0,
                  base_sequence=0, transactional=True)
    assert DefaultRecordBatch(data).is_transactional
    assert decode(data)[0]["attributes"] & TRANSACTIONAL
