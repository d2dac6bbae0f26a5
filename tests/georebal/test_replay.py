"""georebal replay against moto: archives (Firehose's back-to-back objects, gzip'd JSON lines, an s3:// prefix) and a
time range of the ingest stream itself, put at a rate with progress, refused records put again in per-entity order,
a dry run, and the one-line refusals."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from georebal import puts
from tests.georebal.day_after import (
    REGION,
    STACK,
    Deployment,
    FakeClock,
    Refusing,
    WithClient,
    events,
    make_deployment,
    put_events,
)

ROOT = Path(__file__).resolve().parents[2]
CDK = ("--cdk-json", str(ROOT / "cdk.json"))
T0 = 1_778_940_000.0  # 2026-05-16T14:00:00Z


@pytest.fixture
def deployment() -> Iterator[Deployment]:
    with mock_aws():
        yield make_deployment()


def texts(evs: Sequence[dict[str, Any]]) -> list[str]:
    """The events as a producer wrote them (keys in its own order, its own spacing)."""
    return [json.dumps(e, separators=(",", ": ")) for e in evs]


def by_entity(records: Sequence[dict[str, Any]]) -> dict[str, list[bytes]]:
    """Each partition key's record data, in stream order."""
    out: dict[str, list[bytes]] = defaultdict(list)
    for r in records:
        out[r["PartitionKey"]].append(bytes(r["Data"]))
    return dict(out)


def expected(evs: Sequence[dict[str, Any]]) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = defaultdict(list)
    for e, text in zip(evs, texts(evs), strict=True):
        out[e["entity_id"]].append(text.encode())
    return dict(out)


def ingest(deployment: Deployment) -> list[dict[str, Any]]:
    return [r for records in deployment.read_stream(deployment.ingest).values() for r in records]


def test_a_firehose_archive_of_objects_back_to_back_is_put_as_archived(
        deployment: Deployment, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a Firehose-style archive file: 40 events written back to back, no newline between them
    evs = events(40)
    archive = tmp_path / "geo-ingest-1-2026-05-16-14-00-00-abcd"
    archive.write_text("".join(texts(evs)))
    # WHEN it is replayed into the deployment's ingest stream (the stack's output names it)
    status = deployment.run("replay", str(archive), "--stack", STACK, *CDK)
    out = capsys.readouterr().out.splitlines()
    # THEN every event is in the ingest stream once, its bytes unchanged, keyed by its entity, in each entity's order
    assert status == 0
    assert by_entity(ingest(deployment)) == expected(evs)
    assert out[0] == f"replay: 1 file(s) under {str(archive)!r} ({archive.stat().st_size:,} bytes) -> 'dayafter-ingest'"
    assert re.fullmatch(r"replay: 40 event\(s\) put to 'dayafter-ingest' in \d+ s \([\d,]+/s\), \d+ PutRecords "
                        r"call\(s\), 0 refusal\(s\) put again", out[-1])


def test_a_gzipped_json_lines_file_is_read_too(deployment: Deployment, tmp_path: Path) -> None:
    # GIVEN 25 events as gzip'd JSON lines (a name that does not say gzip: the magic number tells)
    evs = events(25)
    archive = tmp_path / "events.jsonl"
    archive.write_bytes(gzip.compress("\n".join(texts(evs)).encode() + b"\n"))
    # WHEN replayed by the ingest stream's name
    status = deployment.run("replay", str(archive), "--ingest-stream", deployment.ingest, *CDK)
    # THEN every event is put once, unchanged, in each entity's order
    assert status == 0 and by_entity(ingest(deployment)) == expected(evs)


def test_an_s3_prefix_is_read_object_by_object_in_key_order(deployment: Deployment) -> None:
    # GIVEN an archive bucket: under archive/ a gzip'd JSON-lines object and a later back-to-back one, and an object
    # outside the prefix
    s3 = deployment.client("s3")
    s3.create_bucket(Bucket="archive", CreateBucketConfiguration={"LocationConstraint": REGION})
    evs = events(30)
    s3.put_object(Bucket="archive", Key="archive/2026/05/16/14/a",
                  Body=gzip.compress("\n".join(texts(evs[:12])).encode()))
    s3.put_object(Bucket="archive", Key="archive/2026/05/16/15/b", Body="".join(texts(evs[12:])).encode())
    s3.put_object(Bucket="archive", Key="other/c", Body=b'{"event_id": "not-me", "entity_id": "x"}')
    # WHEN s3://archive/archive/ is replayed
    status = deployment.run("replay", "s3://archive/archive/", "--stack", STACK, *CDK)
    # THEN the 30 events of both objects are put, in order per entity, and nothing from outside the prefix
    assert status == 0 and by_entity(ingest(deployment)) == expected(evs)


def test_the_rate_paces_the_puts_and_progress_says_sent_rate_and_eta(
        deployment: Deployment, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN 30 events of 30 entities and a clock that moves only when the replay waits
    evs = events(30, entities=30)
    archive = tmp_path / "a.json"
    archive.write_text("\n".join(texts(evs)))
    clock = FakeClock(T0)
    # WHEN replayed at 10 events/s with a progress line every second
    status = deployment.run("replay", str(archive), "--stack", STACK, *CDK, "--rate", "10", "--progress", "1",
                            clock=clock)
    err = capsys.readouterr().err.splitlines()
    # THEN it put 10 a second: three requests, the second and third a second apart, and said so every second
    assert status == 0 and len(ingest(deployment)) == 30
    assert clock.sleeps == [pytest.approx(1.0), pytest.approx(1.0)]
    assert err == ["replay: 20 sent, 20/s, eta 0 s", "replay: 30 sent, 10/s, eta 0 s"]


def test_refused_records_are_put_again_before_their_entitys_later_ones(deployment: Deployment, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN 60 events of 5 entities and a stream that refuses every third record of its first 8 PutRecords calls
    evs = events(60, entities=5)
    archive = tmp_path / "a.json"
    archive.write_text("".join(texts(evs)))
    refusing = Refusing(deployment.client("kinesis"), lambda call, i, record: i % 3 == 0, calls=8)
    # WHEN replayed
    status = deployment.run("replay", str(archive), "--stack", STACK, *CDK, clock=FakeClock(T0),
                            aws=WithClient(deployment.aws, {"kinesis": refusing}))
    # THEN every event is in the stream once and each entity's in its order (a refused record went again before
    # its entity's next), and the summary counts the refusals
    assert status == 0 and refusing.refused > 0
    assert by_entity(ingest(deployment)) == expected(evs)
    assert f"{refusing.refused} refusal(s) put again" in capsys.readouterr().out


def test_records_refused_every_time_stop_the_replay(deployment: Deployment, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a stream that refuses every record of entity ent-2 WHEN 20 events are replayed
    evs = events(20, entities=4)
    archive = tmp_path / "a.json"
    archive.write_text("".join(texts(evs)))
    refusing = Refusing(deployment.client("kinesis"), lambda call, i, record: record["PartitionKey"] == "ent-2")
    clock = FakeClock(T0)
    status = deployment.run("replay", str(archive), "--stack", STACK, *CDK, clock=clock,
                            aws=WithClient(deployment.aws, {"kinesis": refusing}))
    err = capsys.readouterr().err
    # THEN it gives up after the attempts, backing off, with one line (exit 1) naming the stream, the first record
    # and what was put; no record of ent-2 is in the stream, and the other entities' are
    assert status == 1 and len(err.splitlines()) == 1
    assert err.startswith(f"error: 5 record(s) not put to 'dayafter-ingest' after {puts.PUT_ATTEMPTS} attempts "
                          f"(ProvisionedThroughputExceededException), the first {archive} record 3 (partition key "
                          "'ent-2'); 0 put before this batch and 15 of it")
    assert len(clock.sleeps) == puts.PUT_ATTEMPTS - 1 and max(clock.sleeps) == puts.BACKOFF_S[1]
    stored = by_entity(ingest(deployment))
    assert "ent-2" not in stored and stored == {k: v for k, v in expected(evs).items() if k != "ent-2"}


def test_a_dry_run_counts_and_puts_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a local archive of 12 events and no AWS at all
    archive = tmp_path / "a.json"
    archive.write_text("".join(texts(events(12))))
    # WHEN replayed with --dry-run
    from georebal.cli import main

    status = main(["replay", str(archive), "--dry-run", *CDK], aws=lambda r, p: pytest.fail("AWS was asked"))
    out = capsys.readouterr().out.splitlines()
    # THEN it counts the events and their bytes
    assert status == 0
    size = sum(len(t) + len(e["entity_id"]) for t, e in zip(texts(events(12)), events(12), strict=True))
    assert out[-1] == f"replay: 12 event(s), {size:,} bytes, would be put to 'the ingest stream'"


def test_events_the_router_would_not_take_are_skipped_and_named(deployment: Deployment, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an archive with an event without entity_id and a value that is not an object among 3 good events
    good = events(3)
    archive = tmp_path / "a.json"
    archive.write_text(f'{texts(good)[0]}\n{{"event_id": "x"}}\n[1, 2]\n{texts(good)[1]}{texts(good)[2]}')
    # WHEN replayed
    status = deployment.run("replay", str(archive), "--stack", STACK, *CDK)
    err = capsys.readouterr().err
    # THEN the good ones are put, and one warning counts the others and names the first
    assert status == 0 and by_entity(ingest(deployment)) == expected(good)
    assert err == (f"replay: warning: 2 event(s) skipped, the first {archive} record 2: no 'entity_id' the router "
                   "takes (a string of 1 to 256 characters), got 'None'\n")


def test_an_archive_that_is_not_json_is_one_line(deployment: Deployment, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an archive whose second record is cut WHEN replayed
    archive = tmp_path / "a.json"
    archive.write_text(texts(events(1))[0] + '\n{"event_id": "e2", "entity_id": ')
    status = deployment.run("replay", str(archive), "--stack", STACK, *CDK)
    err = capsys.readouterr().err
    # THEN exit 2, one line naming the file and the record
    assert status == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"error: {archive}: record 2 is not JSON (Expecting value")


@pytest.mark.parametrize(("args", "message"), [
    (["a.json", "--from", "2026-05-16T14:00:00Z", "--to", "2026-05-16T15:00:00Z"], "error: give an archive"),
    ([], "error: give an archive"),
    (["--from", "2026-05-16T14:00:00Z"], "error: --from needs --to"),
    (["--from", "2026-05-16T15:00:00Z", "--to", "2026-05-16T14:00:00Z"],
     "error: --from '2026-05-16T15:00:00Z' is not before --to '2026-05-16T14:00:00Z' (--to is cut to now)"),
])
def test_a_source_that_is_not_one_is_one_line(deployment: Deployment, capsys: pytest.CaptureFixture[str],
                                              args: list[str], message: str) -> None:
    # GIVEN an archive and a time range, neither, a range without end or backwards WHEN replayed
    status = deployment.run("replay", *args, "--stack", STACK, clock=FakeClock(T0 + 7200))
    err = capsys.readouterr().err
    # THEN exit 2 with one line saying what to give
    assert status == 2 and len(err.splitlines()) == 1 and err.startswith(message)


def iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_time_range_of_the_ingest_stream_is_put_again_at_its_end(
        deployment: Deployment, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN three groups of events that arrived at 14:00, 14:10 and 14:20 (moto's arrival times set by hand)
    import moto.kinesis.models as kinesis_models

    arrival = [T0]
    monkeypatch.setattr(kinesis_models, "utcnow", lambda: datetime.fromtimestamp(arrival[0], UTC).replace(tzinfo=None))
    groups = [events(9)[3 * g:3 * g + 3] for g in range(3)]
    for g, group in enumerate(groups):
        arrival[0] = T0 + 600 * g
        put_events(deployment.client("kinesis"), deployment.ingest, group)
    arrival[0] = T0 + 1800  # the replay's own puts arrive at 14:30, when it runs
    before = by_entity(ingest(deployment))
    # WHEN the range 14:05 to 14:15 is replayed, and then from 14:15 with --to far in the future
    status = deployment.run("replay", "--from", iso(T0 + 300), "--to", iso(T0 + 900), "--stack", STACK,
                            clock=FakeClock(T0 + 1800))
    middle = by_entity(ingest(deployment))
    again = deployment.run("replay", "--from", iso(T0 + 900), "--to", "2099-01-01T00:00:00Z", "--stack", STACK,
                           clock=FakeClock(T0 + 1800))
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    # THEN the first put the 14:10 group again, after everything, same data and keys, in order
    assert status == 0 and again == 0 and captured.err == ""
    assert middle == {k: before[k] + expected(groups[1]).get(k, []) for k in before}
    # AND the second read up to the moment it started (14:30): the 14:20 group, not its own records again
    assert by_entity(ingest(deployment)) == {k: middle[k] + expected(groups[2]).get(k, []) for k in middle}
    assert out[0] == ("replay: 'dayafter-ingest' records that arrived from 2026-05-16T14:05:00Z to "
                      "2026-05-16T14:15:00Z (2 shard(s)) -> 'dayafter-ingest'")
    assert out[-1].startswith("replay: 3 event(s) put to 'dayafter-ingest'")


def test_a_range_from_before_the_retention_is_warned(deployment: Deployment,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a stream that keeps 24 h WHEN a range from 30 h ago is replayed
    status = deployment.run("replay", "--from", iso(T0 - 30 * 3600), "--to", iso(T0), "--stack", STACK,
                            clock=FakeClock(T0))
    err = capsys.readouterr().err
    # THEN a warning names the --from and the time before which the records are gone
    assert status == 0
    assert err == ("replay: warning: --from 2026-05-15T08:00:00Z is older than the retention of 'dayafter-ingest' "
                   "(24 h): the records that arrived before 2026-05-15T14:00:00Z are gone\n")
