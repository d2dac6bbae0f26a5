"""Quarantine records: what could not be processed, with why, never dropped.

Writers: the Spark job (invalid events, ``glue_jobs.snapshot.write_quarantine`` at :func:`batch_quarantine_key`),
the router Lambda (``lambdas.runtime.s3.QuarantineSink`` under ``quarantine/router/``) and the geo workers
(``geo_service.serving.batches`` at :func:`geo_quarantine_key`). Reader: operators, and the local loop's report
(``local.output``: counts per reason code and per writer). ``reason`` is ``"<code>: <detail naming the bad
value>"`` with a :class:`~geokernel.contracts.events.ReasonCode`, or :data:`TRANSFORM_ERROR` from a worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geokernel.contracts.errors import ContractError

#: The one reason code only a geo worker writes: its transform raised on a valid event.
TRANSFORM_ERROR = "transform_error"
#: A geo record with the state-handoff magic whose stamp or marker does not decode (worker).
BAD_STAMP = "bad_handoff_stamp"


def batch_quarantine_key(batch_id: int, n: int) -> str:
    """The ``n``-th quarantine file of a Spark micro-batch: ``quarantine/batch=<batch:08d>/part-<n:05d>.jsonl``."""
    return f"quarantine/batch={batch_id:08d}/part-{n:05d}.jsonl"


def geo_quarantine_key(version: int, worker_id: str, epoch_ms: int) -> str:
    """Return the key of records a worker could not process: ``quarantine/geo/v<version>/<worker>/<epoch_ms>.jsonl``."""
    return f"quarantine/geo/v{version}/{worker_id}/{epoch_ms}.jsonl"


def lambda_quarantine_key(source: str, day: str, epoch_ms: int, token: str) -> str:
    """A Lambda's quarantine object: ``quarantine/<source>/<YYYY-MM-DD>/<epoch_ms>-<token>.jsonl`` (the router)."""
    return f"quarantine/{source}/{day}/{epoch_ms}-{token}.jsonl"


@dataclass(frozen=True, slots=True)
class QuarantineRecord:
    """One quarantined record: ``reason`` (``<code>: <detail>``), the original text, where it came from, and when.

    ``source`` is ``file:line`` (a batch file), ``<stream>/<shardId>/<seq>`` (Kinesis) or
    ``<stream>/pk=<partitionKey>/<seq>`` (the EMR connector, which exposes no shard id).
    """

    reason: str
    raw: str | None
    source: str | None
    quarantined_at: str

    @property
    def code(self) -> str:
        """The reason code: the text of ``reason`` before its first ``:``."""
        return self.reason.split(":", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, fields in contract order."""
        return {"reason": self.reason, "raw": self.raw, "source": self.source, "quarantined_at": self.quarantined_at}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], where: str) -> QuarantineRecord:
        """Decode one line's object; :class:`ContractError` naming ``where`` when ``reason`` is missing."""
        reason = doc.get("reason")
        if not isinstance(reason, str):
            raise ContractError(f"{where}: a quarantine record needs a 'reason' string, got {reason!r}")
        raw, source = doc.get("raw"), doc.get("source")
        return cls(reason, None if raw is None else str(raw), None if source is None else str(source),
                   str(doc.get("quarantined_at", "")))
