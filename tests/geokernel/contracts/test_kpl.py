"""geokernel.contracts.kpl: KPL aggregated records built by the real encoder (aws_kinesis_agg) decode exactly."""

from __future__ import annotations

import base64
import hashlib

import pytest
from aws_kinesis_agg import deaggregator
from aws_kinesis_agg.aggregator import RecordAggregator
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.contracts.errors import ContractError
from geokernel.contracts.kpl import (
    KPL_DIGEST_SIZE,
    KPL_MAGIC,
    SUB_RECORD_MARK,
    KplError,
    UserRecord,
    deaggregate,
    is_aggregated,
    sub_record_source,
    unpack,
)

KEYS = st.text(min_size=1, max_size=40)
HASH_KEYS = st.none() | st.integers(min_value=0, max_value=2**128 - 1).map(str)
USER_RECORDS = st.lists(st.tuples(KEYS, st.binary(max_size=300), HASH_KEYS), min_size=1, max_size=40)


def aggregate(records: list[tuple[str, bytes, str | None]]) -> bytes:
    """One aggregated record of ``records`` (partition key, data, explicit hash key), by aws_kinesis_agg."""
    agg = RecordAggregator()
    for key, data, ehk in records:
        assert agg.add_user_record(key, data, ehk) is None
    out = agg.clear_and_get()
    assert out is not None
    return bytes(out.get_contents()[2])


def with_digest(body: bytes) -> bytes:
    """An aggregated record around protobuf bytes ``body``, with a correct MD5."""
    return KPL_MAGIC + body + hashlib.md5(body).digest()


@settings(max_examples=150, deadline=None)
@given(USER_RECORDS)
def test_encoder_output_round_trips_payloads_and_keys(records: list[tuple[str, bytes, str | None]]) -> None:
    # GIVEN user records aggregated by the real encoder
    data = aggregate(records)
    # WHEN decoded
    got = unpack(data, "s/shard-0/1")
    # THEN every payload, partition key and explicit hash key comes back, in order
    assert is_aggregated(data)
    assert got == tuple(UserRecord(k, e, d) for k, d, e in records)
    assert deaggregate(data) == tuple(d for _, d, _ in records)
    # AND the encoder's own deaggregator agrees on the payloads
    theirs = deaggregator.iter_deaggregate_records({"Data": data, "SequenceNumber": "1", "PartitionKey": "k",
                                                    "ApproximateArrivalTimestamp": 0}, data_format="Boto3")
    assert [r["kinesis"]["data"] for r in theirs] == [base64.b64encode(d) for _, d, _ in records]


@given(st.binary(max_size=200))
def test_a_record_without_the_magic_is_returned_unchanged(data: bytes) -> None:
    # GIVEN any bytes that do not start with the magic
    if data.startswith(KPL_MAGIC):
        data = b"x" + data
    # WHEN de-aggregated THEN they come back as one record, the same bytes (as the KCL does)
    assert not is_aggregated(data)
    assert deaggregate(data) == (data,)


def test_the_magic_with_16_bytes_or_fewer_is_not_aggregated() -> None:
    # GIVEN the magic followed by exactly a digest's worth of bytes (the KCL's test needs more)
    data = KPL_MAGIC + b"\0" * KPL_DIGEST_SIZE
    # WHEN de-aggregated THEN it is one unchanged record, and unpack says why it is not aggregated
    assert deaggregate(data) == (data,)
    with pytest.raises(KplError, match="not a KPL aggregated record"):
        unpack(data)


def test_an_empty_aggregated_record_has_no_user_records() -> None:
    # GIVEN an AggregatedRecord with empty tables and no records (protobuf bytes: none)
    data = with_digest(b"\x0a\x00")  # one empty partition key, no records
    # WHEN decoded THEN there is nothing (as the KCL)
    assert deaggregate(data) == ()


def test_a_wrong_md5_is_a_contract_error_naming_both_digests() -> None:
    # GIVEN an encoder record with its last digest byte flipped
    good = aggregate([("k", b'{"a": 1}', None)])
    bad = good[:-1] + bytes([good[-1] ^ 0xFF])
    # WHEN decoded THEN a KplError (a ContractError) names where, and both digests
    with pytest.raises(ContractError) as err:
        deaggregate(bad, "ingest/shard-1/42")
    assert isinstance(err.value, KplError)
    assert "ingest/shard-1/42" in str(err.value) and bad[-16:].hex() in str(err.value)
    assert hashlib.md5(good[4:-16]).hexdigest() in str(err.value)


@pytest.mark.parametrize(("body", "names"), [
    (b"\x1a\x05\x08\x00\x1a\x01", "field 3 at byte 0 declares 5 bytes, only 4 remain"),  # a truncated record
    (b"\x1a\x02\x1a\x00", "lacks required field(s) ['partition_key_index']"),
    (b"\x0a\x01k\x1a\x02\x08\x00", "lacks required field(s) ['data']"),
    (b"\x0a\x01k\x1a\x04\x08\x03\x1a\x00", "partition_key_index 3, but the partition key table has 1"),
    (b"\x0a\x01k\x1a\x06\x08\x00\x10\x00\x1a\x00", "explicit_hash_key_index 0, but the explicit hash key table has 0"),
    (b"\x0a\x01k\x1a\x06\x08\x00\x1a\x00\x22\x00", "Tag at byte 9 has no key"),
    (b"\x08\x01", "field 1 at byte 0 has wire type 0, expected 2"),
    (b"\x0a\xff\xff", "varint at byte 1 is truncated"),
    (b"\x0b", "unsupported wire type 3"),
    (b"\x02\x00", "field number 0"),
])
def test_a_malformed_protobuf_is_a_contract_error_naming_the_problem(body: bytes, names: str) -> None:
    # GIVEN a correct digest around a protobuf that is wrong in one way
    data = with_digest(body)
    # WHEN decoded THEN the error names that problem
    with pytest.raises(KplError) as err:
        unpack(data, "here")
    assert names in str(err.value) and str(err.value).startswith("here: ")


def test_key_indices_past_one_varint_byte_decode() -> None:
    # GIVEN 300 user records with distinct partition keys (indices up to 299: two-byte varints), a few with hash keys
    records = [(f"key-{i}", f"payload {i}".encode(), str(i * 7) if i % 50 == 0 else None) for i in range(300)]
    # WHEN encoded and decoded THEN each keeps its own keys and payload
    assert unpack(aggregate(records)) == tuple(UserRecord(k, e, d) for k, d, e in records)


def test_unknown_fields_are_skipped() -> None:
    # GIVEN a record with unknown fields of every wire type around one user record
    body = (b"\x0a\x01k" + b"\x28\x07" + b"\x31" + b"\0" * 8 + b"\x3d" + b"\0" * 4
            + b"\x1a\x08\x08\x00\x1a\x02hi\x40\x01")
    # WHEN decoded THEN the user record comes back
    assert unpack(with_digest(body)) == (UserRecord("k", None, b"hi"),)


def test_sub_record_source_appends_the_index() -> None:
    # GIVEN a parent source WHEN a sub-record's source is built THEN it is the parent, the mark and the index
    assert sub_record_source("ingest/shardId-0/49", 3) == "ingest/shardId-0/49/sub=3"
    assert sub_record_source("p", 0).endswith(f"{SUB_RECORD_MARK}0")
