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
        self.live: float | None = 1000.0  # a spec live since (None: the first deployment is still going)
        self.procs = [Proc(101, "w0", 1), Proc(102, "w1", 1)]
        self.leases = {"v1#w0": Lease("v1#w0", "host:101:aa", 1009.0, False),
                       "v1#w1": Lease("v1#w1", "host:102:bb", 1009.0, False)}
        self.killed: list[int] = []

    def injector(self) -> WorkerKill:
        return WorkerKill(lambda: self.procs, lambda: list(self.leases.values()), lambda: self.status,
                          lambda: self.live, lease_s=9.0, fallback_after_s=60.0, kill=self.killed.append, clock=lambda: self.now)

    def killed_mid_swap(self, status: str = "draining") -> WorkerKill:
        """An injector that killed pid 101 at ``now`` during a swap in ``status``, its exit recorded."""
        fault = self.injector()
        fault.poll()  # the first deployment is done
        self.status = status
        fault.poll()
        self.procs[0].exited_at = self.now
        fault.poll()
        return fault


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
    fault = w.killed_mid_swap()
    w.now += 19
    w.leases["v1#w0"] = Lease("v1#w0", "host:103:cc", w.now + 9, False)
    fault.poll()
    assert fault.record.recovered and not fault.record.within_deadline


def test_the_takeover_time_is_the_claim_the_lease_records_not_the_poll_that_saw_it() -> None:
    # GIVEN a worker killed mid-swap at 1000
    w = World()
    fault = w.killed_mid_swap("waiting_green")
    # WHEN the replacement claimed at 1012 but the loop polls only at 1020 (a loaded machine)
    w.now = 1020.0
    w.leases["v1#w0"] = Lease("v1#w0", "host:103:cc", 1021.0, False, since=1012.0)
    fault.poll()
    # THEN recovered at the claim, 12 s after the kill
    assert fault.record.recovered_at == 1012.0 and fault.record.within_deadline
    # AND a lease item with the old claim time (before the kill) falls back to the poll's time
    w2 = World()
    f2 = w2.killed_mid_swap()
    w2.now = 1015.0
    w2.leases["v1#w0"] = Lease("v1#w0", "host:103:cc", 1020.0, False, since=990.0)
    f2.poll()
    assert f2.record.recovered_at == 1015.0


def test_a_killed_carrier_gets_one_lease_more_for_its_carried_lease() -> None:
    # GIVEN a carrier holding its v1 slot and that slot's v2 lease, killed mid-swap
    w = World()
    w.leases["v2#w0"] = Lease("v2#w0", "host:101:aa", 1009.0, False)
    fault = w.killed_mid_swap()
    assert fault.record.leases == ("v1#w0", "v2#w0") and fault.record.deadline_s == 27.0
    # WHEN the replacement takes the slot after 13 s and the carried lease after 22 s
    w.now += 13
    w.leases["v1#w0"] = Lease("v1#w0", "host:103:cc", w.now + 9, False)
    fault.poll()
    assert not fault.record.recovered
    w.now += 9
    for key in ("v1#w0", "v2#w0"):  # the slot's lease renewed meanwhile
        w.leases[key] = Lease(key, "host:103:cc", w.now + 9, False)
    fault.poll()
    # THEN it recovered within its deadline, with no problem
    assert fault.record.recovered and fault.record.within_deadline and not fault.record.problems
    assert fault.record.took_over_by == {"v1#w0": "host:103:cc", "v2#w0": "host:103:cc"}


def test_a_carrier_whose_slot_lease_took_longer_than_two_leases_is_a_broken_promise() -> None:
    # GIVEN a killed carrier with two leases
    w = World()
    w.leases["v2#w0"] = Lease("v2#w0", "host:101:aa", 1009.0, False)
    fault = w.killed_mid_swap("waiting_green")
    # WHEN its first lease is taken over only after 19 s (both at once)
    w.now += 19
    for key in ("v1#w0", "v2#w0"):
        w.leases[key] = Lease(key, "host:103:cc", w.now + 9, False)
    fault.poll()
    # THEN within the whole deadline, but the slot's takeover is named as too slow
    assert fault.record.within_deadline
    assert fault.record.problems and "19.0 s > 18 s" in fault.record.problems[0]


def test_without_a_swap_the_kill_falls_back_after_the_delay() -> None:
    w = World()
    w.status, w.live = "waiting_green", None  # the first deployment: not a swap yet
    fault = w.injector()
    fault.poll()
    assert w.killed == []
    w.status, w.live = "done", w.now
    fault.poll()
    w.now += 61
    w.leases["v1#w0"] = Lease("v1#w0", "host:101:aa", w.now + 9, False)  # renewed
    fault.poll()
    assert w.killed == [101] and not fault.record.mid_swap


def test_leases_from_scan_items() -> None:
    items = [{"lease_key": {"S": "v2#w3"}, "owner": {"S": "h:7:x"}, "expires_at": {"N": "12.5"},
              "drained": {"BOOL": True}}, {"lease_key": {"S": "v2#w4"}}]
    assert leases_from_items(items) == [Lease("v2#w3", "h:7:x", 12.5, True), Lease("v2#w4", None, 0.0, False)]
    claimed = [{"lease_key": {"S": "v2#w5"}, "owner": {"S": "h:8:y"}, "expires_at": {"N": "20"},
                "claimed_at": {"N": "11.5"}, "drained_at": {"N": "15"}}]
    assert leases_from_items(claimed)[0].since == 11.5  # not drained: the claim's time
    assert leases_from_items(items)[0].pid() == 7 and leases_from_items(items)[1].pid() is None


def test_killing_the_last_running_worker_of_a_version_is_an_outage_of_that_fault() -> None:
    # GIVEN a one-slot version v2 beside a two-slot v1, each lease held by a live process
    w = World()
    w.procs = [Proc(101, "w0", 2), Proc(102, "w0", 1), Proc(103, "w1", 1)]
    w.leases = {"v2#w0": Lease("v2#w0", "host:101:aa", 1009.0, False),
                "v1#w0": Lease("v1#w0", "host:102:bb", 1009.0, False),
                "v1#w1": Lease("v1#w1", "host:103:cc", 1009.0, False)}
    # WHEN the kill takes v2's only worker
    fault = w.killed_mid_swap()
    # THEN the span without a running worker of v2 is the fault's outage (judged against its deadline)
    assert w.killed == [101] and fault.record.outage


def test_killing_one_of_several_workers_of_a_version_is_no_outage() -> None:
    # GIVEN two processes holding v1's two slots WHEN one is killed
    w = World()
    fault = w.killed_mid_swap()
    # THEN v1 still has a running worker: no outage, the one-lease rule stays
    assert w.killed == [101] and not fault.record.outage


def test_no_worker_is_killed_while_the_loop_holds_the_fault_back() -> None:
    # GIVEN a swap in flight while another deploy fault is open (the loop's hold says so)
    w = World()
    held = [True]
    fault = WorkerKill(lambda: w.procs, lambda: list(w.leases.values()), lambda: w.status, lambda: w.live,
                       lease_s=9.0, fallback_after_s=60.0, kill=w.killed.append, hold=lambda: held[0],
                       clock=lambda: w.now)
    w.status = "waiting_green"
    # WHEN the injector polls THEN nothing is killed
    fault.poll()
    assert w.killed == [] and fault.record.injected_at is None
    # WHEN the other fault recovered and the swap still runs THEN the kill comes
    held[0] = False
    w.now += 1
    fault.poll()
    assert w.killed == [101] and fault.record.injected_at == w.now and fault.record.mid_swap
