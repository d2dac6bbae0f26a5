"""SlotId: one worker slot of one spec version, the value leases, stamps, markers, reports and tools all name.

Its one text form is ``v<version>#<worker_id>``: the lease item's key (:data:`geokernel.contracts.lease.LEASE_KEY_ATTR`),
the label a stamped record and a handoff marker carry (:mod:`geokernel.contracts.handoff`), the slot ``georebal
locate`` and the local report print. It is parsed once where it is read: :meth:`SlotId.parse` raises naming the text,
:meth:`SlotId.match` answers None for a key that is not a slot's (the handover summary's ``handover#v<n>``).
"""

from __future__ import annotations

from dataclasses import dataclass

from geokernel.contracts.errors import ContractError


@dataclass(frozen=True, slots=True, order=True)
class SlotId:
    """A worker slot of a spec version.

    Parameters
    ----------
    version : int
        The spec version (>= 0).
    worker_id : str
        The worker slot's id in that spec (``w0001``...), not empty.

    Raises
    ------
    ContractError
        Naming the bad value.

    Notes
    -----
    ``str(slot)`` is the text form; ``SlotId.parse(str(slot)) == slot``. A worker id may itself hold ``#`` (the
    version ends at the first one), as the lease key's reader always allowed.
    """

    version: int
    worker_id: str

    def __post_init__(self) -> None:
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise ContractError(f"a slot's version is an int >= 0, got {self.version!r}")
        if not isinstance(self.worker_id, str) or not self.worker_id:
            raise ContractError(f"a slot's worker id is a non-empty string, got {self.worker_id!r}")

    def __str__(self) -> str:
        return f"v{self.version}#{self.worker_id}"

    @classmethod
    def match(cls, text: str) -> SlotId | None:
        """The slot ``text`` names (``v<version>#<worker_id>``), or None for any other string."""
        head, sep, worker = text.partition("#")
        if not sep or not worker or head[:1] != "v" or not head[1:].isdigit() or not head[1:].isascii():
            return None
        return cls(int(head[1:]), worker)

    @classmethod
    def parse(cls, text: str, where: str = "slot") -> SlotId:
        """The slot ``text`` names; :class:`ContractError` naming ``text`` and ``where`` it came from otherwise."""
        slot = cls.match(text)
        if slot is None:
            raise ContractError(f"{where}: not a slot (v<version>#<worker_id>): {text!r}")
        return slot
