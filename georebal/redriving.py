"""Redriving one router failure message: read its range of the ingest stream back and put the records again.

The message names a shard and a sequence range (:mod:`georebal.failures`); the records are read with
``AT_SEQUENCE_NUMBER`` until past the range's end (:func:`georebal.ingest.read_range`) and put onto the same stream
with the same data and partition key, in their order (:class:`georebal.puts.Putter`): they land at the stream's end
and the router routes them again by the spec active then. A range the stream no longer holds whole (older than its
retention: Kinesis trimmed its first records, or the shard is gone) puts what is left and says what is missing;
such a message is not complete, so it is not deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from georebal.failures import FailureMessage
from georebal.ingest import read_range, retention_hours
from georebal.progress import Say
from georebal.puts import Putter
from georebal.smoke.clock import Clock, took


@dataclass(frozen=True)
class Outcome:
    """What one message's redrive did: records put again, and whether its whole range was found and put."""

    message: FailureMessage
    records: int
    complete: bool


def _span(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else took(seconds)


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Redriver:
    """Redrives messages onto their streams (``dry_run``: reads and counts only); warnings through ``warn``."""

    def __init__(self, kinesis: Any, clock: Clock, warn: Say, *, rate: float | None = None,
                 dry_run: bool = False) -> None:
        self.kinesis, self.clock, self.warn, self.rate, self.dry_run = kinesis, clock, warn, rate, dry_run
        self._retention: dict[str, int] = {}

    def retention_s(self, stream: str) -> int:
        if stream not in self._retention:
            self._retention[stream] = retention_hours(self.kinesis, stream)
        return self._retention[stream] * 3600

    def redrive(self, message: FailureMessage) -> Outcome:
        """Read the range and put its records again (raises :class:`~georebal.errors.PutError` when puts fail)."""
        self._warn_if_expired(message)
        read = read_range(self.kinesis, message.stream, message.shard_id, message.start, message.end, self.clock)
        putter = Putter(self.kinesis, message.stream, self.clock, rate=self.rate, dry_run=self.dry_run)
        putter.add_all([r.out(message.stream) for r in read.records])
        totals = putter.finish()
        if not read.complete:
            expected = f" of {message.batch_size:,}" if message.batch_size is not None else ""
            first = f", the first read {read.records[0].sequence}" if read.records else ""
            why = f" ({read.gone})" if read.gone else ""
            self.warn(f"message {message.message_id}: range {message.range} is not whole in the stream{why}: "
                      f"{len(read.records):,}{expected} record(s) found{first}; the rest are gone (trimmed past the "
                      f"retention): replay their time from the archive (georebal replay), then delete the message")
        return Outcome(message, totals.records, read.complete)

    def _warn_if_expired(self, message: FailureMessage) -> None:
        if message.first_arrival_s is None:
            return
        age, retention = self.clock.now() - message.first_arrival_s, self.retention_s(message.stream)
        if age > retention:
            self.warn(f"message {message.message_id}: range {message.range} arrived {_iso(message.first_arrival_s)} "
                      f"({_span(age)} ago), older than the retention of {message.stream!r} ({_span(retention)}): "
                      f"its records are gone, or going")
