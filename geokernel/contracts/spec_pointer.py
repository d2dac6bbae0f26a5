"""Where a spec version is stored, and the two control items that point at one: ``desired`` and ``active``.

* ``specs/v<version:08d>.json`` (:func:`spec_key`) in the specs bucket: immutable, written by the partitioner (and
  by the deploy controller when it redeploys the live spec for new worker code) before any pointer names it.
* Control ``pk="desired"`` (:class:`DesiredPointer`): the newest published spec; written by the partitioner (and the
  code redeploy) with a conditional put that only moves it forward; read by the partitioner (the previous spec, the
  next version number) and the deploy controller (what to deploy).
* Control ``pk="active"`` (:class:`ActivePointer`): the spec the router routes by; moved forward by the deploy
  controller at the flip; read by the router (the whole pointer), the partitioner (spec age, the version whose cost
  reports it merges), the deploy controller, and, for the version alone (:meth:`ActivePointer.version_of`), the geo
  workers (drain when a newer version is active) and the local loop's observer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from geokernel.contracts.control import ControlKey, control_item
from geokernel.contracts.dynamo import plain_item
from geokernel.contracts.fields import optional_int, require_int, require_str, text

_SPEC_KEY = re.compile(r"^specs/v(\d{8,})\.json$")


def spec_key(version: int) -> str:
    """Return the S3 key of an immutable spec: ``specs/v<version:08d>.json``."""
    return f"specs/v{version:08d}.json"


def parse_spec_key(key: str) -> int | None:
    """Return the version a spec key names, or None for any other key."""
    m = _SPEC_KEY.match(key)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True)
class DesiredPointer:
    """Control ``pk="desired"``: the latest published spec (``published_at`` ISO-8601 UTC)."""

    version: int
    spec_key: str
    published_at: str

    def to_item(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> DesiredPointer:
        """Decode the item's plain values; :class:`~geokernel.contracts.errors.ContractError` naming a bad field."""
        what = control_item(ControlKey.DESIRED)
        return cls(require_int(item, "version", what), require_str(item, "spec_key", what), text(item, "published_at"))


@dataclass(frozen=True, slots=True)
class ActivePointer:
    """Control ``pk="active"``: the spec the router routes by and its geo stream (``flipped_at`` ISO-8601 UTC)."""

    version: int
    spec_key: str
    stream_name: str
    flipped_at: str

    def to_item(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> ActivePointer:
        """Decode the item's plain values; :class:`~geokernel.contracts.errors.ContractError` naming a bad field."""
        what = control_item(ControlKey.ACTIVE)
        return cls(require_int(item, "version", what), require_str(item, "spec_key", what),
                   require_str(item, "stream_name", what), text(item, "flipped_at"))

    @staticmethod
    def version_of(item: Mapping[str, Any]) -> int | None:
        """The active version alone (None when the item has none), for readers that need nothing else."""
        return optional_int(item, "version", control_item(ControlKey.ACTIVE))

    @staticmethod
    def version_of_raw(item: Mapping[str, Mapping[str, Any]]) -> int | None:
        """:meth:`version_of` of an item in attribute-value form (as ``BatchGetItem`` returns it)."""
        return ActivePointer.version_of(plain_item(item))
