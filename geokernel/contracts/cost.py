"""Worker cost reports: measured CPU cost per event per grid quadkey, one JSON object per worker and interval.

Writer: the geo worker (``geo_service.pipeline.cost.CostReport.to_record``, put by ``geo_service.serving.batches``) at
:func:`cost_key`. Readers: the partitioner Lambda (each worker's latest report of the active version, its
``rates`` only: ``lambdas.runtime.s3.CostReports``), the Spark job (``rates``, to weight snapshot rows:
``glue_jobs.batch.read_cost_rates``) and the local loop (utilisation: ``local.worker_load.cost_sample``).
A rate is CPU seconds per event divided by ``calibration`` (the CPU seconds of a reference workload on that
machine), so rates compare across hardware (``docs/CONTRACTS.md``, "Cost reports").

Every reader decodes a report with :meth:`CostReportRecord.from_json` / :meth:`~CostReportRecord.from_dict`, the one
decoder; what a reader does with a report it cannot read is its own tolerance: the partitioner Lambda skips it and
names it in its result, the Spark job skips it with a line (streaming) or stops naming it (batch CLI), the local
report stops naming it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from geokernel.contracts.errors import ContractError

_COST_KEY = re.compile(r"^costs/v(?P<version>\d+)/(?P<worker>[^/]+)/(?P<epoch_s>\d+)\.json$")


def cost_key(version: int, worker_id: str, epoch_s: float) -> str:
    """Return the key of a cost report: ``costs/v<version>/<worker_id>/<epoch_s>.json`` (whole seconds)."""
    return f"costs/v{version}/{worker_id}/{int(epoch_s)}.json"


def cost_prefix(version: int) -> str:
    """Every cost report of one spec version is under ``costs/v<version>/``."""
    return f"costs/v{version}/"


def parse_cost_key(key: str) -> tuple[int, str, int] | None:
    """Return ``(version, worker_id, epoch_s)`` of a :func:`cost_key`, or None for any other key."""
    m = _COST_KEY.match(key)
    return (int(m["version"]), m["worker"], int(m["epoch_s"])) if m else None


@dataclass(frozen=True, slots=True)
class CostReportRecord:
    """One cost report as stored: rates and event counts per quadkey at ``quadkey_zoom`` over ``interval_s``.

    ``reported_at`` (epoch s) is the end of the interval; ``calibration`` the CPU seconds of one reference workload
    on the reporting machine.
    """

    version: int
    worker: str
    partition_ids: tuple[str, ...]
    interval_s: float
    calibration: float
    quadkey_zoom: int
    rates: Mapping[str, float] = field(default_factory=dict)
    events: Mapping[str, int] = field(default_factory=dict)
    reported_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON body, in the stored field order, quadkeys sorted."""
        return {"version": self.version, "worker": self.worker, "partition_ids": list(self.partition_ids),
                "interval_s": self.interval_s, "calibration": self.calibration, "quadkey_zoom": self.quadkey_zoom,
                "rates": dict(sorted(self.rates.items())), "events": dict(sorted(self.events.items())),
                "reported_at": self.reported_at}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], where: str) -> CostReportRecord:
        """Decode a report body; :class:`ContractError` naming ``where`` and the bad value.

        Notes
        -----
        Every field is required (a report names the fields it lacks). A rate must be a finite number >= 0 and an
        event count an integer >= 0 (JSON has no NaN, but Python's ``json`` reads one); ``calibration`` must be
        positive and ``interval_s`` >= 0. Quadkeys are checked as strings only: a reader that joins on them checks
        them as quadkeys.
        """
        missing = [name for name in _FIELDS if name not in doc]
        if missing:
            raise ContractError(f"{where}: cost report lacks {missing!r}")
        try:
            record = cls(version=int(doc["version"]), worker=str(doc["worker"]),
                         partition_ids=tuple(str(p) for p in doc["partition_ids"]),
                         interval_s=float(doc["interval_s"]), calibration=float(doc["calibration"]),
                         quadkey_zoom=int(doc["quadkey_zoom"]), rates=decode_rates(doc["rates"], where),
                         events=_decode_events(doc["events"], where), reported_at=float(doc["reported_at"]))
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ContractError):
                raise
            raise ContractError(f"{where}: unreadable cost report ({type(exc).__name__}: {exc})") from None
        if not (math.isfinite(record.calibration) and record.calibration > 0):
            raise ContractError(f"{where}: cost report calibration must be > 0, got {record.calibration!r}")
        if not (math.isfinite(record.interval_s) and record.interval_s >= 0):
            raise ContractError(f"{where}: cost report interval_s must be >= 0, got {record.interval_s!r}")
        return record

    @classmethod
    def from_json(cls, raw: bytes | str, where: str) -> CostReportRecord:
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise ContractError(f"{where}: cost report is not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise ContractError(f"{where}: a cost report is a JSON object, got {type(doc).__name__}")
        return cls.from_dict(doc, where)


_FIELDS = ("version", "worker", "partition_ids", "interval_s", "calibration", "quadkey_zoom", "rates", "events",
           "reported_at")


def parse_rate(value: object, where: str) -> float:
    """A cost rate: a finite number >= 0 (not a bool); :class:`ContractError` naming ``where`` and the value."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ContractError(f"{where}: rate must be a finite number >= 0, got {value!r}")
    return float(value)


def decode_rates(value: object, where: str) -> dict[str, float]:
    """The ``rates`` object of a report: quadkey string -> :func:`parse_rate`."""
    if not isinstance(value, Mapping):
        raise ContractError(f"{where}: a cost report's 'rates' must be an object, got {type(value).__name__}")
    return {str(q): parse_rate(r, f"{where} quadkey {q!r}") for q, r in value.items()}


def _decode_events(value: object, where: str) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise ContractError(f"{where}: a cost report's 'events' must be an object, got {type(value).__name__}")
    out: dict[str, int] = {}
    for q, n in value.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ContractError(f"{where} quadkey {q!r}: event count must be an integer >= 0, got {n!r}")
        out[str(q)] = n
    return out
