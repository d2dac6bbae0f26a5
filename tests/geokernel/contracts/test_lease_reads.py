"""geokernel.contracts.lease.read_lease_batches: the one lease batch read (the deploy controller's and the workers')."""

from __future__ import annotations

from typing import Any

from geokernel.contracts.lease import BATCH_GET_KEYS, LEASE_KEY_ATTR, read_lease_batches


class Table:
    """A leases table answering BatchGetItem: each call leaves the last ``hold_back`` keys unprocessed once."""

    def __init__(self, present: set[str], hold_back: int = 0, always_hold: bool = False) -> None:
        self.present, self.hold_back, self.always_hold = present, hold_back, always_hold
        self.calls: list[list[str]] = []

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        ((table, req),) = RequestItems.items()
        keys = [k[LEASE_KEY_ATTR]["S"] for k in req["Keys"]]
        assert len(keys) <= BATCH_GET_KEYS and len(set(keys)) == len(keys)  # DynamoDB refuses duplicates in one call
        self.calls.append(keys)
        held = keys[len(keys) - self.hold_back:] if self.hold_back else []
        if not self.always_hold:
            self.hold_back = 0
        items = [{LEASE_KEY_ATTR: {"S": k}, "owner": {"S": "h:1:a"}, "expires_at": {"N": "10"}}
                 for k in keys if k in self.present and k not in held]
        return {"Responses": {table: items}, "UnprocessedKeys": {table: {"Keys": [{LEASE_KEY_ATTR: {"S": k}}
                                                                                for k in held]}} if held else {}}


def test_each_slot_is_read_once_100_to_a_call_and_unprocessed_keys_are_asked_again() -> None:
    # GIVEN 250 slots of v3 (one listed twice), 240 with a lease, and a table that leaves 7 keys unprocessed once
    ids = [f"w{i:04d}" for i in range(250)] + ["w0001"]
    table = Table({f"v3#w{i:04d}" for i in range(240)}, hold_back=7)
    # WHEN read
    read = read_lease_batches(table.batch_get_item, "leases", 3, ids, sleep=lambda s: None)
    # THEN three batches of at most 100 keys plus one retry of the 7, every lease found once, none left
    assert [len(c) for c in table.calls] == [100, 7, 100, 50]
    assert sorted(read.leases) == [f"w{i:04d}" for i in range(240)] and read.unprocessed == 0
    assert read.leases["w0007"].owner == "h:1:a" and read.leases["w0007"].version == 3


def test_keys_left_unprocessed_after_every_try_are_counted_for_the_caller() -> None:
    # GIVEN a table that never processes the last 2 keys of a call
    table = Table({"v1#w1", "v1#w2", "v1#w3"}, hold_back=2, always_hold=True)
    pauses: list[float] = []
    # WHEN 3 slots are read
    read = read_lease_batches(table.batch_get_item, "leases", 1, ["w1", "w2", "w3"], sleep=pauses.append)
    # THEN the first was read, the last two counted as unprocessed after 8 calls with growing pauses
    assert list(read.leases) == ["w1"] and read.unprocessed == 2
    assert len(table.calls) == 8 and pauses == sorted(pauses) and len(pauses) == 8
