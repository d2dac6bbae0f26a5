"""State handoff of a stateful transform: what the router stamps, the markers it sends, the keys of handed-off state.

With ``STATE_HANDOFF=1`` the router keeps, per ingest shard, each entity's last routed event: its number ``n``
(1, 2, ...) and the slot it went to (its :class:`~geokernel.contracts.slot.SlotId` as text, the label). It then puts every event as a **stamped** record
(:func:`encode_stamped`: :data:`STAMP_MAGIC`, a JSON header ``{"n": n, "prev": label-or-null}``, a newline and the
original event bytes unchanged), and when an entity's slot changes it first puts a **marker**
(:func:`encode_marker`: :data:`MARKER_MAGIC` and ``{"entity": id, "n": n - 1, "to": label}``) to the slot of
event ``n - 1``, behind that event in the same shard. The old slot answers the marker once it applied ``n - 1``:
it writes the entity's state under :func:`handoff_key` ``(entity, n - 1)`` (control table) and forgets it. The
new slot holds the entity's events until that item (or the old slot's final state, :func:`state_key` with
``final=True``, written when it drained) is there.

Writers: ``lambdas.router`` (stamps, markers, :func:`router_ledger_key`); ``geo_service.entity.handoff`` (handoff items,
state objects). Readers: ``geo_service.entity.handoff``, the router (its own ledger). The magic bytes start with NUL, which
no JSON event and no KPL aggregated record (``f3 89 9a c2``) starts with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from geokernel.contracts.errors import ContractError

#: First bytes of a stamped event record.
STAMP_MAGIC = b"\x00grs1\n"
#: First bytes of a handoff marker record.
MARKER_MAGIC = b"\x00grm1\n"
#: Attribute of a handoff item holding the entity's state (JSON text, or absent when it had none).
STATE_ATTR = "state"
#: Seconds a handoff item lives (DynamoDB TTL attribute ``expires_at``): far longer than any hold.
HANDOFF_TTL_S = 86_400


def handoff_key(entity_id: str, n: int) -> str:
    """Control-table key of an entity's state after its event ``n``: ``handoff#<n>#<entity_id>``."""
    return f"handoff#{n}#{entity_id}"


def state_key(version: int, worker_id: str, *, final: bool) -> str:
    """Output-bucket key of a slot's states: ``state/v<version>/<worker>/latest.json`` (written with each flush,
    read by a successor that takes the slot over) or ``.../final.json`` (written when the slot drained)."""
    return f"state/v{version}/{worker_id}/{'final' if final else 'latest'}.json"


def router_ledger_key(stream_name: str, shard_id: str) -> str:
    """Specs-bucket key of the router's ledger of one ingest shard: ``router-ledger/<stream>/<shard>.json``."""
    return f"router-ledger/{stream_name}/{shard_id}.json"


@dataclass(frozen=True, slots=True)
class Stamp:
    """What the router adds to an event: its number for the entity and the slot of the entity's event before."""

    n: int
    prev: str | None


@dataclass(frozen=True, slots=True)
class Marker:
    """The entity left this slot after its event ``n``; its state goes to the slot ``to``."""

    entity_id: str
    n: int
    to: str


def encode_stamped(stamp: Stamp, data: bytes) -> bytes:
    """A stamped record: :data:`STAMP_MAGIC`, the JSON header, a newline, then ``data`` unchanged."""
    head = json.dumps({"n": stamp.n, "prev": stamp.prev}, separators=(",", ":")).encode()
    return STAMP_MAGIC + head + b"\n" + data


def encode_marker(marker: Marker) -> bytes:
    """A marker record: :data:`MARKER_MAGIC` and its JSON."""
    body = {"entity": marker.entity_id, "n": marker.n, "to": marker.to}
    return MARKER_MAGIC + json.dumps(body, separators=(",", ":")).encode()


def is_marker(data: bytes) -> bool:
    return data.startswith(MARKER_MAGIC)


def split_stamped(data: bytes) -> tuple[Stamp | None, bytes]:
    """``(stamp, event bytes)`` of a stamped record, or ``(None, data)`` for a plain one.

    Raises
    ------
    ContractError
        The record starts with :data:`STAMP_MAGIC` but its header is not ``{"n": int >= 1, "prev": str|null}``.
    """
    if not data.startswith(STAMP_MAGIC):
        return None, data
    head, sep, rest = data[len(STAMP_MAGIC):].partition(b"\n")
    try:
        obj: Any = json.loads(head) if sep else None
    except ValueError:
        obj = None
    n = obj.get("n") if isinstance(obj, dict) else None
    prev = obj.get("prev") if isinstance(obj, dict) else None
    if type(n) is not int or n < 1 or not (prev is None or isinstance(prev, str)):
        raise ContractError(f"bad stamp header of a stamped record: {head[:200]!r}")
    return Stamp(n, prev), rest


def event_bytes(data: bytes) -> bytes:
    """The event bytes of a geo record: ``data`` itself, without its stamp, or ``b""`` for a marker or a bad stamp."""
    if data.startswith(MARKER_MAGIC):
        return b""
    try:
        return split_stamped(data)[1]
    except ContractError:
        return b""


def decode_marker(data: bytes) -> Marker:
    """The :class:`Marker` of a marker record; :class:`ContractError` naming the bad bytes."""
    try:
        obj: Any = json.loads(data[len(MARKER_MAGIC):])
    except ValueError:
        obj = None
    if (not isinstance(obj, dict) or not isinstance(obj.get("entity"), str) or type(obj.get("n")) is not int
            or not isinstance(obj.get("to"), str)):
        raise ContractError(f"bad handoff marker: {data[:200]!r}")
    return Marker(obj["entity"], obj["n"], obj["to"])
