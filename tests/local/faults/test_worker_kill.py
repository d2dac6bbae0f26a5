"""local.faults.worker_kill: a worker killed mid-swap, its leases taken over within two lease durations."""

from __future__ import annotations

from dataclasses import dataclass

from local.faults.worker_kill import Lease, WorkerKill, leases_from_items


@dataclass
class Proc:
    pid: int
    worker_id: str
    version: int
    exited_at: float | None = None


class World:
    """A fleet of two processes holding v1 leases, a deploy status and a clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.status = "done"
        self.procs = [Proc(101, "w0", 1), Proc(102, "w1", 1)]
        self.leases = {"v1#w0": Lease("v1#w0", "host:101:aa", 1009.0, False),
                       "v1#w1": Lease("v1#w1", "host:102:bb", 1009.0, False)}
        self.killed: list[int] = []

    def injector(self) -> WorkerKill:
        return WorkerKill(lambda: self.procs, lambda: list(self.leases.values()), lambda: self.status,
                          lease_s=9.0, fallback_after_s=60.0, kill=self.killed.append, clock=lambda: self.now)


def test_a_worker_is_killed_mid_swap_and_recovers_when_its_lease_is_taken_over() -> None:
    # GIVEN no swap in flight
    w = World()
    fault = w.injector()
    fault.poll()
    # THEN nothing is killed
    assert w.killed == [] and fault.record.injected_at is None
    # WHEN a swap is waiting for green THEN the first lease holder is killed -9
    w.status = "waiting_green"
    fault.poll()
    assert w.killed == [101] and fault.record.mid_swap and fault.record.leases == ("v1#w0",)
    # WHEN the supervisor records the exit THEN the fault is detected at that time
    w.now += 1
    w.procs[0].exited_at = w.now
    fault.poll()
    assert fault.record.detected_at == w.now and not fault.record.recovered
    # WHEN the lease only expired THEN it is not recovered yet
    w.now += 9
    fault.poll()
    assert not fault.record.recovered
    # WHEN the replacement owns it live THEN it is recovered, within two lease durations
    w.leases["v1#w0"] = Lease("v1#w0", "host:103:cc", w.now + 9, False)
    fault.poll()
    assert fault.record.recovered and fault.record.within_deadline
    assert fault.record.took_over_by == {"v1#w0": "host:103:cc"}
    assert "mid-swap" in fault.record.row(990.0)


def test_a_takeover_later_than_two_lease_durations_is_reported_late() -> None:
    w = World()
    fault = w.injector()
    fault.poll()
    w.status = "draining"
    fault.poll()
    w.procs[0].exited_at = w.now
    fault.poll()
    w.now += 19
    w.leases["v1#w0"] = Lease("v1#w0", "host:103:cc", w.now + 9, False)
    fault.poll()
    assert fault.record.recovered and not fault.record.within_deadline


def test_without_a_swap_the_kill_falls_back_after_the_delay() -> None:
    w = World()
    w.status = "waiting_green"  # the first deployment: not a swap yet
    fault = w.injector()
    fault.poll()
    assert w.killed == []
    w.status = "done"
    fault.poll()
    w.now += 61
    w.leases["v1#w0"] = Lease("v1#w0", "host:101:aa", w.now + 9, False)  # renewed
    fault.poll()
    assert w.killed == [101] and not fault.record.mid_swap


def test_leases_from_scan_items() -> None:
    items = [{"lease_key": {"S": "v2#w3"}, "owner": {"S": "h:7:x"}, "expires_at": {"N": "12.5"},
              "drained": {"BOOL": True}}, {"lease_key": {"S": "v2#w4"}}]
    assert leases_from_items(items) == [Lease("v2#w3", "h:7:x", 12.5, True), Lease("v2#w4", None, 0.0, False)]
    assert leases_from_items(items)[0].pid() == 7 and leases_from_items(items)[1].pid() is None
