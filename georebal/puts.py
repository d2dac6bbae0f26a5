"""Putting records to a Kinesis stream for ``replay`` and ``redrive``: batched, paced, retried, in per-key order.

* **Batches**: ``PutRecords`` of at most 500 records and 5 MiB (a record's data plus its partition key count;
  https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecords.html), and no more than one second of
  ``rate``.
* **Order**: ``PutRecords`` writes the records of a request independently, so a request never carries two records
  of one partition key (an entity, for the ingest stream): a batch goes out in waves of the next record of every
  key still pending (as the router does, ``lambdas/router/waves.py``); a record refused (a per-record
  ``ErrorCode``: the shard's write quota, ``ProvisionedThroughputExceededException``) stays first in its key's line
  and is put again, after a backoff, before any later record of that key.
* **Retries**: a record is tried :data:`PUT_ATTEMPTS` times; then :class:`~georebal.errors.PutError` names how many
  were not put and why (what was put before stays put; the records after it were not sent). The SDK retries a
  throttled call itself (:mod:`georebal.aws`: standard retries).
* **Pace**: with ``rate`` (records/s) each request waits until the records sent so far are due.
* ``dry_run``: count only, no call.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from georebal.deployment import client_error
from georebal.errors import InputError, PutError
from georebal.progress import Progress
from georebal.smoke.clock import Clock
from lambdas.runtime.kinesis import KINESIS_MAX_BYTES, KINESIS_MAX_RECORDS

MAX_RECORD_BYTES = 1024 * 1024  # a record's data plus its partition key
MAX_KEY_CHARS = 256
PUT_ATTEMPTS = 10
BACKOFF_S = (0.1, 5.0)  # the first backoff, doubling to the cap


@dataclass(frozen=True)
class OutRecord:
    """One record to put: its bytes, its partition key and where it came from (for messages)."""

    data: bytes
    partition_key: str
    where: str

    @property
    def size(self) -> int:
        return len(self.data) + len(self.partition_key.encode())


def check_record(record: OutRecord) -> str | None:
    """Why Kinesis would refuse ``record`` (None: it would not)."""
    if not 1 <= len(record.partition_key) <= MAX_KEY_CHARS:
        return f"partition key of {len(record.partition_key)} characters (1 to {MAX_KEY_CHARS})"
    if record.size > MAX_RECORD_BYTES:
        return f"{record.size:,} bytes with its partition key (at most {MAX_RECORD_BYTES:,})"
    return None


@dataclass(frozen=True)
class PutTotals:
    """What a :class:`Putter` did: records and bytes put, ``PutRecords`` calls, records put again after a refusal."""

    records: int
    bytes: int
    calls: int
    retried: int


class Putter:
    """Puts :class:`OutRecord` s to ``stream`` (see the module docstring); :meth:`add` each, then :meth:`finish`."""

    def __init__(self, kinesis: Any, stream: str, clock: Clock, *, rate: float | None = None, dry_run: bool = False,
                 progress: Progress | None = None) -> None:
        self.kinesis, self.stream, self.clock, self.rate, self.dry_run = kinesis, stream, clock, rate, dry_run
        self.progress = progress
        self.batch_records = KINESIS_MAX_RECORDS if rate is None else max(1, min(KINESIS_MAX_RECORDS, int(rate)))
        self._batch: list[OutRecord] = []
        self._size = 0
        self._records = self._bytes = self._calls = self._retried = 0
        self._attempted = 0
        self._t0: float | None = None

    def add(self, record: OutRecord) -> None:
        """Queue ``record``, putting the batch when it is full; :class:`InputError` when Kinesis would refuse it."""
        bad = check_record(record)
        if bad is not None:
            raise InputError(f"{record.where}: cannot be put to {self.stream!r}: {bad}")
        if self._batch and (len(self._batch) >= self.batch_records or self._size + record.size > KINESIS_MAX_BYTES):
            self.flush()
        self._batch.append(record)
        self._size += record.size

    def add_all(self, records: Sequence[OutRecord]) -> None:
        for record in records:
            self.add(record)

    def flush(self) -> None:
        batch, self._batch, self._size = self._batch, [], 0
        if not batch:
            return
        if not self.dry_run:
            self._put_batch(batch)
        self._records += len(batch)
        self._bytes += sum(r.size for r in batch)
        if self.progress is not None:
            self.progress.add(len(batch))

    def finish(self) -> PutTotals:
        """Put what is queued; the totals."""
        self.flush()
        return PutTotals(self._records, self._bytes, self._calls, self._retried)

    def _put_batch(self, batch: list[OutRecord]) -> None:
        lines: dict[str, deque[int]] = {}
        for i, record in enumerate(batch):
            lines.setdefault(record.partition_key, deque()).append(i)
        tries = [0] * len(batch)
        failing = 0
        while lines:
            wave = [line[0] for line in lines.values()]
            refused = self._put_wave([batch[i] for i in wave])
            for k, i in enumerate(wave):
                tries[i] += 1
                if k in refused:
                    continue
                line = lines[batch[i].partition_key]
                line.popleft()
                if not line:
                    del lines[batch[i].partition_key]
            if not refused:
                failing = 0
                continue
            self._retried += len(refused)
            stuck = [wave[k] for k in refused if tries[wave[k]] >= PUT_ATTEMPTS]
            if stuck:
                self._give_up(batch, stuck, set(refused.values()), sum(len(v) for v in lines.values()))
            failing += 1
            self.clock.sleep(min(BACKOFF_S[0] * 2 ** (failing - 1), BACKOFF_S[1]))

    def _put_wave(self, records: list[OutRecord]) -> dict[int, str]:
        """Put ``records`` in one call; the index and error code of each refused."""
        self._pace(len(records))
        entries = [{"Data": r.data, "PartitionKey": r.partition_key} for r in records]
        try:
            answer = self.kinesis.put_records(StreamName=self.stream, Records=entries)
        except ClientError as exc:
            raise PutError(f"PutRecords to {self.stream!r} failed ({client_error(exc)}) at {records[0].where}; "
                           f"{self._records:,} record(s) were put before it") from None
        except BotoCoreError as exc:
            raise PutError(f"PutRecords to {self.stream!r} failed ({exc}) at {records[0].where}; "
                           f"{self._records:,} record(s) were put before it") from None
        self._calls += 1
        return {k: str(r["ErrorCode"]) for k, r in enumerate(answer.get("Records", [])) if r.get("ErrorCode")}

    def _pace(self, n: int) -> None:
        if self.rate is None:
            return
        now = self.clock.now()
        if self._t0 is None:
            self._t0 = now
        wait = self._t0 + self._attempted / self.rate - now
        if wait > 0:
            self.clock.sleep(wait)
        self._attempted += n

    def _give_up(self, batch: list[OutRecord], stuck: list[int], codes: set[str], left: int) -> None:
        first = batch[stuck[0]]
        raise PutError(f"{left:,} record(s) not put to {self.stream!r} after {PUT_ATTEMPTS} attempts "
                       f"({', '.join(sorted(codes))}), the first {first.where} (partition key "
                       f"{first.partition_key!r}); {self._records:,} put before this batch and "
                       f"{len(batch) - left:,} of it")
