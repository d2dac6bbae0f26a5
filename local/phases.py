"""Watching the running loop: the replay phase, the tail phase, the progress line and the fail-fast checks.

:func:`replay_phase` follows the replay until it sent its last event; :func:`tail_phase` then stops rebalancing
and waits for every event to come out and deployments (and faults) to finish. Both poll the faults
(:mod:`local.faults.follow`), announce flips and fail fast when a component died (:func:`check_children`).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass, field

from local.dataset import Scenario
from local.faults.follow import fault_pending, poll_faults, snapshot_fault_open
from local.loops import LoopThread
from local.replay import RecordedTimeline, ReplayThread
from local.state import RunState, say

#: The tail gives up after drain_timeout_s without new output (counted from when no swap is in flight), and never
#: waits longer than this many drain timeouts in total, unless an injected fault is still open within its deadline.
TAIL_HARD_LIMIT_FACTOR = 3


#: How often the replay phase reads the output (seconds), and more often while the warm-up backlog comes out.
OUT_READ_S = 5.0
OUT_READ_WARMUP_S = 1.0
#: The router is said to fall behind when, over this many seconds of the replay, it routed less than
#: :data:`LAG_SHARE` of what was sent and the events waiting for it are more than this many seconds of sending.
LAG_SPAN_S = 30.0
LAG_SHARE = 0.9


@dataclass
class RouterLag:
    """Says once when the router falls behind the replay for good (this machine cannot route the replay's rate).

    A replay faster than the router leaves events waiting in the ingest stream: they come out late, the
    utilisation per window follows the router instead of the log, and the run's tail can time out. The run goes
    on (the invariants judge it); the line tells the user why and what to change.
    """

    samples: deque[tuple[float, int, int]] = field(default_factory=deque)
    said: bool = False

    def check(self, now: float, sent: int, routed: int) -> str | None:
        """Record ``(now, sent, routed)``; return the line to say the first time the router fell behind, else None."""
        self.samples.append((now, sent, routed))
        while now - self.samples[0][0] > LAG_SPAN_S:
            self.samples.popleft()
        t0, sent0, routed0 = self.samples[0]
        span = now - t0
        if self.said or span < 0.9 * LAG_SPAN_S or sent <= sent0:
            return None
        send_rate, route_rate = (sent - sent0) / span, (routed - routed0) / span
        if route_rate >= LAG_SHARE * send_rate or sent - routed <= send_rate * LAG_SPAN_S:
            return None
        self.said = True
        return (f"the router falls behind the replay: {sent - routed:,} events wait in the ingest stream; over the "
                f"last {span:.0f}s it routed {route_rate:,.0f} events/s against {send_rate:,.0f} sent per second. "
                "This machine cannot route this rate (events come out late, the utilisation per window follows the "
                "router, the tail may time out): replay slower with --speed (a recorded log) or --rate")


def backlog_line(replayer: ReplayThread) -> str:
    """Why the replay's clock started: the warm-up backlog came out, or the wait for it timed out."""
    assert replayer.live_at is not None and replayer.started_at is not None
    waited = replayer.started_at - replayer.live_at
    return (f"warm-up backlog of {replayer.backlog} events out {waited:.1f}s after the first spec was active: "
            "the replay clock starts" if replayer.backlog_out else
            f"warm-up backlog of {replayer.backlog} events not all out {waited:.0f}s after the first spec was "
            "active: the replay clock starts anyway (its first windows are not measured until it is out)")


def status_line(state: RunState) -> str:
    """The progress line: events, snapshots, specs, active version, workers, flips, output."""
    r, n, o, f = state.replayer, state.notifier, state.observer, state.fleet
    sent = len(r.sent_ids) if r else 0
    specs = sorted(v for v, s in (o.specs.items() if o else []) if s is not None)
    per_version = " ".join(f"v{v}:{f.alive(v)}" for v in f.versions()) if f else ""
    phase = "warm-up" if r is None or r.warming_up else f"replay {100 * r.fraction:3.0f}%"
    if r is not None and r.started_at is not None:
        assert state.scenario is not None
        phase += f" {state.scenario.phase(r.fraction)} (sim {state.scenario.sim_time(r.fraction):%H:%M} UTC)"
    return (f"t={time.time() - state.started_at:5.0f}s  {phase}  "
            f"sent {sent}  routed {state.router.records_in if state.router else 0}  "
            f"out {len(state.output.ids) if state.output else 0}  snapshots {len(n.invocations) if n else 0}  "
            f"specs {','.join(f'v{v}' for v in specs) or '-'}  "
            f"active {f'v{o.active_version}' if o and o.active_version else '-'}  "
            f"workers {f.alive() if f else 0} ({per_version})  flips {len(o.flips) if o else 0}")


def progress(state: RunState, last_print: float) -> float:
    """Redraw the status line (TTY, every second) or print it (logs, every 5 s)."""
    now = time.time()
    if sys.stdout.isatty():
        print("\r\x1b[2K" + status_line(state), end="", flush=True)
        return now
    if now - last_print >= 5.0:
        print(status_line(state), flush=True)
        return now
    return last_print


def check_children(state: RunState) -> None:
    """Fail fast when a loop died or the Spark job exited."""
    for loop in (state.notifier, state.surge_notifier, state.router, state.observer, state.deployer, state.replayer):
        if isinstance(loop, LoopThread) and loop.fatal:
            raise RuntimeError(f"{loop.name} stopped: {loop.fatal}")
    if state.spark is not None and not state.spark.alive() and not any(
            getattr(f, "owns_exit", lambda: False)() for f in state.faults):
        raise RuntimeError(f"the Spark job exited with code {state.spark.popen.returncode}; "
                           f"last log lines:\n{state.spark.tail()}")


def announce_flips(state: RunState, seen: int) -> int:
    """Say every flip the observer saw after the first ``seen``; return how many it saw."""
    assert state.observer is not None
    flips = state.observer.flips
    for old, new, _at in flips[seen:]:
        say(state, f"FLIP active spec v{old if old is not None else '-'} -> v{new}")
    return len(flips)


def replay_phase(state: RunState, scenario: Scenario | RecordedTimeline) -> None:
    """Watch the replay until it is done: progress, phases, flips, output."""
    assert state.replayer is not None and state.output is not None
    last_print, flips_seen, last_out_read, phase = 0.0, 0, 0.0, ""
    lag = RouterLag()
    while not state.replayer.done:
        time.sleep(0.25)
        check_children(state)
        poll_faults(state)
        flips_seen = announce_flips(state, flips_seen)
        # (a KPL record holds several events: the router's count of records is not comparable to events sent; an
        # injected fault such as stream-throttle holds the router back on purpose: no span crosses one)
        if fault_pending(state):
            lag.samples.clear()
        elif state.replayer.started_at is not None and state.router is not None and not state.config.kpl:
            behind = lag.check(time.time(), len(state.replayer.sent_ids), state.router.records_in)
            if behind:
                say(state, behind)
        if state.replayer.started_at is not None and scenario.phase(state.replayer.fraction) != phase:
            if not phase:
                say(state, backlog_line(state.replayer))
            phase = scenario.phase(state.replayer.fraction)
            say(state, f"replay phase: {phase} (simulated {scenario.sim_time(state.replayer.fraction):%H:%M} UTC)")
        # the replay's clock waits for the warm-up backlog to come out (local.replay): read the output more often
        if time.time() - last_out_read > (OUT_READ_WARMUP_S if state.replayer.warming_up else OUT_READ_S):
            state.output.refresh()
            last_out_read = time.time()
        last_print = progress(state, last_print)
    state.flips_announced = flips_seen


def tail_phase(state: RunState) -> None:
    """After the replay: stop rebalancing, wait for every event to come out and deployments to end."""
    assert state.replayer is not None and state.output is not None and state.notifier is not None
    cfg = state.config
    state.replay_ended_at = time.time()
    # the stream ended: no more rebalancing, let in-flight deployments finish. A snapshot fault still open is
    # recovered only by a window judged after it (a Spark outage from spark-kill can push that past the replay's
    # end, seen under load): the notifier runs on until none is open
    notifying = snapshot_fault_open(state)
    if not notifying:
        state.notifier.stop()
    if state.surge_notifier is not None:  # no relief of the tail's backlog either
        state.surge_notifier.stop()
    say(state, f"replay done: {len(state.replayer.sent_ids)} valid events and "
               f"{sum(state.replayer.bad_sent.values())} bad ones sent; snapshot notifications "
               f"{'on until the open snapshot fault recovered' if notifying else 'stopped'}; "
               f"waiting for every event to come out and deployments to finish (gives up after "
               f"{cfg.drain_timeout_s:g}s without new output and no swap in flight, or "
               f"{TAIL_HARD_LIMIT_FACTOR * cfg.drain_timeout_s:g}s"
               f"{' or an open fault deadline' if fault_pending(state) else ''})")
    last_print, flips_seen = 0.0, state.flips_announced
    sent = set(state.replayer.sent_ids)
    hard_deadline = time.time() + TAIL_HARD_LIMIT_FACTOR * cfg.drain_timeout_s
    last_progress, seen_out = time.time(), len(state.output.ids)
    # a fault still open is judged against its own deadline, which can lie past the hard limit (a Spark restart on
    # a loaded 2-core machine took 127 s of a 180 s deadline): the tail does not end a fault's time early
    # (and a tail wait, local.faults.hooks.SwapForHooks, holds it while the swap it made is under way)
    waits = True  # the waits are first asked at the first tick
    while fault_pending(state) or waits or (
            time.time() < hard_deadline and time.time() - last_progress < cfg.drain_timeout_s):
        time.sleep(1.0)
        check_children(state)
        poll_faults(state)
        waits = any([w() for w in state.tail_waits])  # each one asked every tick
        if notifying and not snapshot_fault_open(state):
            state.notifier.stop()
            notifying = False
        flips_seen = announce_flips(state, flips_seen)
        state.output.refresh()
        idle = state.deployer.idle()  # one read of the control table per tick
        if len(state.output.ids) > seen_out:  # still draining: a slow machine gets more time, a stall does not
            last_progress, seen_out = time.time(), len(state.output.ids)
        elif not idle:  # a swap in flight holds records at its handover gate until its slots are
            last_progress = time.time()  # ready: seen for 40 s under load; the no-output clock starts after it
        last_print = progress(state, last_print)
        if sent <= state.output.ids and idle and not waits and all(
                f.record.recovered for f in state.faults if f.record.injected_at is not None):
            break
    state.output.refresh()
    state.drained_cleanly = sent <= state.output.ids
    in_flight = "" if state.deployer.idle() else f"; deployment still in flight at shutdown: {state.deployer.describe()}"
    say(state, ("all events out" if state.drained_cleanly else
                f"tail timeout: {len(sent - state.output.ids)} events not out yet") + in_flight)
