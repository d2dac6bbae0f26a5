"""LeaseManager against DynamoDB (moto server): exclusive claims, heartbeats, takeover, drain, release."""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest
from geo_testkit import Resources

from geo_service.adapters.aws import Clients
from geo_service.leases.lease import LeaseError, LeaseLost, LeaseManager
from geokernel.contracts.slot import SlotId

SLOTS = ["w0001", "w0002", "w0003", "w0004"]


class FakeClock:
    """A settable epoch clock shared by several managers."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _manager(clients: Clients, res: Resources, owner: str, clock: FakeClock, version: int = 5,
             lease_s: float = 30.0) -> LeaseManager:
    return LeaseManager(clients.dynamodb, res.leases_table, version, owner, lease_s, clock=clock)


def test_concurrent_claimers_never_share_a_slot(clients: Clients, resources: Resources) -> None:
    # GIVEN 16 threads, each with its own manager (own owner id), racing for 4 slots, over 4 rounds (versions)
    threads_n, rounds = 16, 4
    winners: dict[tuple[int, str], list[str]] = defaultdict(list)
    lock = threading.Lock()

    def contend(version: int, i: int, barrier: threading.Barrier) -> None:
        m = LeaseManager(clients.dynamodb, resources.leases_table, version, f"owner-{version}-{i}", 30.0)
        barrier.wait()
        lease = m.claim_any(SLOTS)
        if lease is not None:
            with lock:
                winners[(version, lease.worker_id)].append(m.owner)

    # WHEN every round starts all claimers at once
    for version in range(1, rounds + 1):
        barrier = threading.Barrier(threads_n)
        threads = [threading.Thread(target=contend, args=(version, i, barrier)) for i in range(threads_n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)

    # THEN each slot of each round has exactly one winner, and DynamoDB names that winner as owner
    assert sorted(winners) == [(v, s) for v in range(1, rounds + 1) for s in SLOTS]
    for (version, slot), owners in winners.items():
        assert len(owners) == 1, f"slot {slot} of v{version} claimed by {owners}"
        item = clients.dynamodb.get_item(TableName=resources.leases_table,
                                         Key={"lease_key": {"S": str(SlotId(version, slot))}}, ConsistentRead=True)
        assert item["Item"]["owner"]["S"] == owners[0]


def test_expired_lease_is_taken_over_and_old_owner_is_fenced(clients: Clients, resources: Resources) -> None:
    # GIVEN owner A holding slot w0001 with a checkpoint, and owner B wanting it
    clock = FakeClock()
    a, b = _manager(clients, resources, "A", clock), _manager(clients, resources, "B", clock)
    assert a.claim("w0001") is not None
    a.checkpoint("shardId-000000000000", "49590")
    a.mark_ready()
    # WHEN A stops heartbeating: before expiry B is refused, after expiry B takes over
    clock.now += 29.0
    refused = b.claim("w0001")
    clock.now += 2.0
    taken = b.claim("w0001")
    # THEN B holds it with A's checkpoint, not ready yet, and A's writes are rejected
    assert refused is None
    assert taken is not None and taken.checkpoint == {"shardId-000000000000": "49590"} and taken.claims == 2
    state = b.read("w0001")
    assert state is not None and state.owner == "B" and state.ready is False
    with pytest.raises(LeaseLost, match="no longer owned by 'A'"):
        a.heartbeat()
    assert a.lease is None


def test_heartbeat_keeps_the_lease(clients: Clients, resources: Resources) -> None:
    # GIVEN A holding a 30 s lease that heartbeats every 10 s
    clock = FakeClock()
    a, b = _manager(clients, resources, "A", clock), _manager(clients, resources, "B", clock)
    a.claim("w0002")
    # WHEN 100 s pass with heartbeats
    for _ in range(10):
        clock.now += 10.0
        a.heartbeat()
        # THEN nobody can take it over
        assert b.claim("w0002") is None
    state = a.read("w0002")
    assert state is not None and state.expires_at == pytest.approx(clock.now + 30.0, abs=0.01)


def test_release_frees_the_slot_and_drained_slots_are_never_reclaimed(clients: Clients,
                                                                      resources: Resources) -> None:
    # GIVEN A releasing w0001 gracefully, and A draining then releasing w0002 (another manager)
    clock = FakeClock()
    a = _manager(clients, resources, "A", clock)
    a.claim("w0001")
    assert a.release() is True
    a2 = _manager(clients, resources, "A2", clock)
    a2.claim("w0002")
    a2.mark_drained()
    a2.release()
    # WHEN B tries both
    b = _manager(clients, resources, "B", clock)
    got = b.claim_any(["w0002", "w0001"])
    # THEN the released slot is claimable at once, the drained one is not (even when it looks expired)
    assert got is not None and got.worker_id == "w0001"
    drained = b.read("w0002")
    assert drained is not None and drained.drained and drained.released and drained.owner is None
    clock.now += 1000
    assert _manager(clients, resources, "C", clock).claim("w0002") is None


def test_one_manager_holds_one_lease_and_lost_lease_writes_fail(clients: Clients, resources: Resources) -> None:
    # GIVEN a manager holding one slot
    clock = FakeClock()
    a = _manager(clients, resources, "A", clock)
    a.claim("w0003")
    # WHEN it tries to claim a second one, and then writes after being taken over
    with pytest.raises(LeaseError, match="already holds lease 'v5#w0003'"):
        a.claim("w0004")
    clock.now += 31
    _manager(clients, resources, "B", clock).claim("w0003")
    # THEN every owned write raises LeaseLost and release reports False without raising
    with pytest.raises(LeaseLost):
        a.checkpoint("shardId-000000000000", "1")
    a2 = _manager(clients, resources, "A", clock)
    assert a2.release() is False


def test_valid_follows_the_injected_clock(clients: Clients, resources: Resources) -> None:
    # GIVEN a 10 s lease
    clock = FakeClock()
    a = _manager(clients, resources, "A", clock, lease_s=10.0)
    assert not a.valid()
    a.claim("w0001")
    # WHEN time passes without heartbeats
    states = []
    for step in (5.0, 4.9, 0.2):
        clock.now += step
        states.append(a.valid())
    # THEN the lease is valid until its expiry
    assert states == [True, True, False]


def test_owner_can_reclaim_its_own_slot_after_a_local_expiry(clients: Clients, resources: Resources) -> None:
    # GIVEN A holding w0001, which gave up locally (e.g. a stalled heartbeat) without releasing
    clock = FakeClock()
    a = _manager(clients, resources, "A", clock)
    a.claim("w0001")
    a.checkpoint("shardId-000000000000", "7")
    a.forget()
    # WHEN A claims again before the item expires, while B tries too
    again = a.claim("w0001")
    other = _manager(clients, resources, "B", clock).claim("w0001")
    # THEN A gets it back with its checkpoint and B is refused
    assert again is not None and again.checkpoint == {"shardId-000000000000": "7"} and other is None
