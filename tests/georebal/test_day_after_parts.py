"""The day-after tools' parts: JSON values cut anywhere across reads, PutRecords' size limits, a resharded stream read
parents first, an iterator that expired while records were being put."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.kinesis import models as kinesis_models

from georebal import archive
from georebal.errors import InputError
from georebal.ingest import ShardReader, TimeRange, list_shards
from georebal.puts import MAX_RECORD_BYTES, OutRecord, Putter
from tests.georebal.day_after import FakeClock
from tests.georebal.smoke_fakes import moto_aws

T0 = 1_778_940_000.0


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
def test_json_values_cut_at_any_byte_come_out_whole(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    # GIVEN objects back to back, on lines, with spaces, a multi-byte character and a number at the very end
    text = '{"a":1}{"b":[1,2]}\n {"c":"é"}\r\n\t{"d":12345}'
    monkeypatch.setattr(archive, "CHUNK", chunk)
    # WHEN read in chunks of ``chunk`` bytes
    values = list(archive.json_values(io.BytesIO(text.encode()), "t"))
    # THEN every value comes out whole, with its exact text
    assert values == [({"a": 1}, '{"a":1}'), ({"b": [1, 2]}, '{"b":[1,2]}'), ({"c": "é"}, '{"c":"é"}'),
                      ({"d": 12345}, '{"d":12345}')]


class Recording:
    """A Kinesis client that writes every record and remembers each call's records."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    def put_records(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(kw["Records"])
        return {"FailedRecordCount": 0, "Records": [{"SequenceNumber": "1", "ShardId": "s"} for _ in kw["Records"]]}


def test_requests_stay_within_500_records_and_5_mib() -> None:
    # GIVEN 12 records of ~1 MiB and 1,200 small ones, of distinct keys
    kinesis = Recording()
    putter = Putter(kinesis, "s", FakeClock(T0))
    big = [OutRecord(b"x" * (MAX_RECORD_BYTES - 10), f"k{i}", f"big {i}") for i in range(12)]
    small = [OutRecord(b"{}", f"s{i}", f"small {i}") for i in range(1200)]
    # WHEN they are put
    putter.add_all(big + small)
    totals = putter.finish()
    # THEN no request holds more than 500 records or 5 MiB, and every record went once, in order
    assert max(len(c) for c in kinesis.calls) == 500
    assert max(sum(len(r["Data"]) + len(r["PartitionKey"]) for r in c) for c in kinesis.calls) <= 5 * 1024 * 1024
    assert [r["PartitionKey"] for c in kinesis.calls for r in c] == [r.partition_key for r in big + small]
    assert totals.records == 1212 and totals.calls == len(kinesis.calls)


@pytest.mark.parametrize(("record", "why"), [
    (OutRecord(b"x" * MAX_RECORD_BYTES, "k", "f record 3"), "1,048,577 bytes with its partition key (at most "
                                                             "1,048,576)"),
    (OutRecord(b"{}", "k" * 257, "f record 3"), "partition key of 257 characters (1 to 256)"),
])
def test_a_record_kinesis_would_refuse_is_named(record: OutRecord, why: str) -> None:
    # GIVEN a record too big, or with too long a key WHEN added THEN the error names it and why
    with pytest.raises(InputError) as raised:
        Putter(Recording(), "s", FakeClock(T0)).add(record)
    assert str(raised.value) == f"f record 3: cannot be put to 's': {why}"


@pytest.fixture
def kinesis() -> Iterator[Any]:
    with mock_aws():
        yield moto_aws().client("kinesis")


def test_a_resharded_stream_is_read_parents_first(kinesis: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a stream whose one shard was split after an entity's first two records, then its third
    monkeypatch.setattr(kinesis_models, "utcnow", lambda: datetime.fromtimestamp(T0, UTC).replace(tzinfo=None))
    kinesis.create_stream(StreamName="s", ShardCount=1)
    for n in (1, 2):
        kinesis.put_record(StreamName="s", Data=f"{n}".encode(), PartitionKey="e")
    kinesis.split_shard(StreamName="s", ShardToSplit="shardId-000000000000",
                        NewStartingHashKey=str(2 ** 127))
    kinesis.put_record(StreamName="s", Data=b"3", PartitionKey="e")
    # WHEN the shards are listed and the time range read
    shards = list_shards(kinesis, "s")
    got = [r.data for r in TimeRange(kinesis, "s", T0 - 1, T0 + 1, FakeClock(T0 + 60)).records()]
    # THEN the parent comes before its children, and the entity's records in order
    assert shards[0].shard_id == "shardId-000000000000" and shards[0].closed
    assert {p for s in shards[1:] for p in s.parents} == {"shardId-000000000000"}
    assert got == [b"1", b"2", b"3"]


class Expiring:
    """A Kinesis client whose second GetRecords call finds its iterator expired."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls, self.iterators = inner, 0, []

    def get_records(self, **kw: Any) -> Any:
        self.calls += 1
        if self.calls == 2:
            raise ClientError({"Error": {"Code": "ExpiredIteratorException", "Message": "Iterator expired"}},
                              "GetRecords")
        return self.inner.get_records(**kw)

    def get_shard_iterator(self, **kw: Any) -> Any:
        self.iterators.append((kw["ShardIteratorType"], kw.get("StartingSequenceNumber")))
        return self.inner.get_shard_iterator(**kw)


def test_an_expired_iterator_is_asked_again_after_the_last_record_read(kinesis: Any) -> None:
    # GIVEN 5 records and a client whose iterator expires after the first 2 were read
    kinesis.create_stream(StreamName="s", ShardCount=1)
    for n in range(5):
        kinesis.put_record(StreamName="s", Data=f"{n}".encode(), PartitionKey="e")
    client = Expiring(kinesis)
    reader = ShardReader(client, "s", "shardId-000000000000", FakeClock(T0), limit=2)
    # WHEN the shard is read from its first record
    got = [r.data for r in reader.records("AT_SEQUENCE_NUMBER", lambda r: False, StartingSequenceNumber="1")]
    # THEN it goes on after the last record read, none lost or doubled
    assert got == [b"0", b"1", b"2", b"3", b"4"]
    assert client.iterators == [("AT_SEQUENCE_NUMBER", "1"), ("AFTER_SEQUENCE_NUMBER", "2")]
