"""The report's EVENTBRIDGE section and invariant: the geofence transitions received on the bus against the output.

With a transform whose transitions the workers push (:func:`local.environment.geofence_events`), the loop creates
its geofence bus in moto with a rule sending every geofence event to a CloudWatch Logs group (:meth:`local.aws.
EmbeddedAws.create_geofence_bus`). :class:`GeofenceLog` reads the group once the workers stopped
(:func:`read_received`); :func:`compare` holds what
arrived against the transitions of the enriched records the workers wrote, both deduplicated by the events'
``IdempotencyKey`` (delivery is at least once: a record written again after a takeover is pushed again): every
transition of the output received, nothing received that the output lacks, and each received event's detail equal
to the one the output's record makes (:func:`geo_service.pipeline.geofence_events.details_of`). Any difference
fails the run. The workers' ``geofence_events_put`` log lines give the ``PutEvents`` calls they made.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geo_service.adapters.logs import EVENT_KEY, read_line
from geo_service.pipeline.geofence_events import details_of
from geokernel.contracts.enriched import EnrichedRecord

NAME = ("every geofence transition in the output was received on the EventBridge bus, and nothing else, after "
        "dedupe by IdempotencyKey (local/report/eventbridge.py)")
EXAMPLES = 5


@dataclass(frozen=True)
class Puts:
    """What the workers' ``geofence_events_put`` log lines say they put: entries, calls, entries put again."""

    events: int = 0
    calls: int = 0
    retried: int = 0


@dataclass(frozen=True)
class EventBridgeResult:
    """The received events against the output's transitions (module docstring)."""

    received: int  # distinct idempotency keys received
    deliveries: int  # events received, copies included
    in_output: int  # distinct transitions in the output
    missing: int
    extra: int
    differing: int
    examples: tuple[str, ...] = ()
    puts: Puts = Puts()

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.extra == 0 and self.differing == 0

    def line(self) -> str:
        """The summary line."""
        return (f"EVENTBRIDGE: {self.received} transitions received, {self.in_output} in the output, {self.missing} "
                f"missing, {self.extra} extra")

    def section(self) -> list[str]:
        p = self.puts
        return ["EVENTBRIDGE (the geofence transitions the workers put on the bus, received by a rule into a log group; "
                "local/report/eventbridge.py)", f"  {self.line()}",
                f"  {self.deliveries} events received ({self.deliveries - self.received} copies of a transition "
                f"put again, at least once: removed by IdempotencyKey); {self.differing} with a detail differing from "
                f"the output's record",
                f"  the workers put {p.events} events in {p.calls} PutEvents calls (at most 10 entries each), "
                f"{p.retried} entries put again after a retryable failure",
                *(f"  e.g. {e}" for e in self.examples)]


def read_received(logs: Any, log_group: str) -> list[dict[str, Any]]:
    """The events the rule sent to the log group (each log event's message, one event as a rule's target gets it),
    read page by page to the end.

    Notes
    -----
    A rule puts each event in its own log stream; ``FilterLogEvents`` reads across the group's streams, at most
    10,000 events a page, the next page by ``nextToken`` (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/
    APIReference/API_FilterLogEvents.html). A message that is not JSON is kept as ``{"unreadable": text}``, so
    :func:`compare` counts it as extra rather than dropping it.
    """
    out: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = logs.filter_log_events(logGroupName=log_group, **({"nextToken": token} if token else {}))
        for event in page.get("events", []):
            try:
                out.append(json.loads(event["message"]))
            except ValueError:
                out.append({"unreadable": event["message"]})
        token = page.get("nextToken")
        if not token:
            return out


class GeofenceLog:
    """The loop's geofence log group, read by the report once the workers stopped (:meth:`drain`)."""

    def __init__(self, logs: Any, log_group: str) -> None:
        self.logs, self.log_group = logs, log_group

    def drain(self) -> list[dict[str, Any]]:
        """Every event the rule sent to the group so far (:func:`read_received`)."""
        return read_received(self.logs, self.log_group)


def output_details(records: Iterable[EnrichedRecord]) -> dict[str, dict[str, Any]]:
    """The event detail of every transition of the records, by idempotency key (copies of a record give one)."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        for d in details_of({**r.fields, "event_id": r.event_id}):
            out.setdefault(d["IdempotencyKey"], d)
    return out


def compare(records: Iterable[EnrichedRecord], received: Sequence[dict[str, Any]], puts: Puts = Puts()
            ) -> EventBridgeResult:
    """The received events (``received``: the events as a rule's target gets them) against the records' transitions."""
    want = output_details(records)
    got: dict[str, dict[str, Any]] = {}
    for event in received:
        detail = event.get("detail") if isinstance(event, dict) else None
        key = detail.get("IdempotencyKey") if isinstance(detail, dict) else None
        got.setdefault(str(key), detail if isinstance(detail, dict) else {"unreadable": event})
    missing = [k for k in want if k not in got]
    extra = [k for k in got if k not in want]
    differing = [k for k in got if k in want and got[k] != want[k]]
    examples = ([f"missing: {want[k]}" for k in missing[:EXAMPLES]] + [f"extra: {got[k]}" for k in extra[:EXAMPLES]]
                + [f"differing: received {got[k]}, the output makes {want[k]}" for k in differing[:EXAMPLES]])
    return EventBridgeResult(len(got), len(received), len(want), len(missing), len(extra), len(differing),
                             tuple(examples[:EXAMPLES]), puts)


def worker_puts(logs: Iterable[Path]) -> Puts:
    """The sums of the workers' ``geofence_events_put`` log lines (:func:`geo_service.adapters.logs.read_line`; other
    lines are skipped)."""
    events = calls = retried = 0
    for path in logs:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if '"geofence_events_put"' not in line:
                continue
            doc = read_line(line)  # the worker's Powertools line: its event is the message
            if doc is None or doc.get(EVENT_KEY) != "geofence_events_put":
                continue
            events, calls, retried = (events + int(doc.get("events", 0)), calls + int(doc.get("calls", 0)),
                                      retried + int(doc.get("retried", 0)))
    return Puts(events, calls, retried)


def check(result: EventBridgeResult | None, error: str | None) -> tuple[str, bool, str]:
    """The invariant: the log group was read and matches the output."""
    if result is None:
        return NAME, False, f"the received events could not be compared: {error}"
    return NAME, result.ok, result.line() + (f"; {result.differing} differing" if result.differing else "")
