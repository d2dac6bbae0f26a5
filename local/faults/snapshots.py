"""Snapshot faults of the local loop (``--faults snapshot-corrupt,snapshot-dup``) and what they measure.

``snapshot-corrupt``: once a spec is live and ``delay_s`` passed, three bad snapshots land in the snapshots bucket,
each under a manifest key the S3 notification delivers to the partitioner like any other:

* ``truncated``: a copy of the newest real snapshot (its window moved to now) whose first data file lost its second
  half, as an interrupted upload leaves it (the manifest's sha256 no longer matches);
* ``not-a-snapshot``: a ``_manifest.json`` that holds CSV text, not a manifest;
* ``bad-rows``: a self-consistent snapshot (hashes and checksum match) with a quadkey that is not one.

*Detected* when the partitioner rejected all three (each with one line naming the bad value and the object it came
from), *recovered* when a real snapshot after them was judged (published or held by the policy). A corrupt snapshot
that is not rejected, a rejection spanning lines or not naming its object, or a desired pointer that moved on a
corrupt snapshot's invocation is a broken promise (:attr:`local.faults.record.FaultRecord.problems`): the run fails.

``snapshot-dup``: S3 event notifications are delivered at least once and not in order
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventNotifications.html, "Event ordering and duplicate
events"). Once a spec is live and ``delay_s`` passed, the fault holds back the notification of a window two windows
ahead of the newest snapshot written (it is marked seen before it exists, so the notifier skips it), redelivers the
last judged snapshot's event (the same S3 event a second time), and, once a later window was judged, delivers the
held one. The partitioner must answer ``duplicate`` to the first (or ``stale_snapshot`` when a newer window was judged
in between) and reject the second as ``stale_snapshot``; anything else, or a desired pointer that moved on either delivery, is a broken promise. *Detected* when both
answers came. *Recovered* when, read right after the late delivery, the partitioner's snapshot mark (control
``pk="snapshot"``) still names the newer window judged after the duplicate: the rejection wrote nothing and the
partitioner stands where that window left it. A mark at or before the held window is a broken promise.

Until stop 36 recovery waited for one window more, judged after the late delivery. That needs Spark to close another
window before the replay ends; under CI's load, with ``spark-kill`` near the end, it did not (the fault failed with
every answer right). A rejection writes nothing (:mod:`lambdas.partitioner.logic`), so the mark says the same thing
at once, and does not depend on the harness's timing.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from geokernel.contracts.outcome import OutcomeStatus
from geokernel.contracts.snapshot import (
    MANIFEST_NAME,
    SNAPSHOTS_PREFIX,
    SnapshotFile,
    SnapshotManifest,
    iso,
    manifest_checksum,
)
from local.faults.record import FaultRecord, LiveDelay, LiveSince
from local.outcomes import outcome

JUDGED = (OutcomeStatus.PUBLISHED, OutcomeStatus.HELD)  # a snapshot the partitioner used (a spec published, or the policy held it)
KINDS = ("truncated", "not-a-snapshot", "bad-rows")
WINDOW_KEY = f"{SNAPSHOTS_PREFIX}window_end="
MANIFEST = MANIFEST_NAME
STAMP = "%Y-%m-%dT%H-%M-%SZ"


class Store(Protocol):
    """The snapshots bucket: read, write and list keys (sorted)."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, body: bytes) -> None: ...

    def manifests(self) -> list[str]: ...


class Call(Protocol):
    """One partitioner invocation (:class:`local.loops.Invocation`)."""

    key: str
    at: float
    result: Any
    error: str | None


def _window_end(key: str) -> datetime | None:
    """The window end in a real snapshot key ``snapshots/window_end=<stamp>/_manifest.json`` (None otherwise)."""
    if not key.startswith(WINDOW_KEY):
        return None
    try:
        return datetime.strptime(key[len(WINDOW_KEY):].split("/", 1)[0], STAMP).replace(tzinfo=UTC)
    except ValueError:
        return None


def _sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def corrupt_snapshots(store: Store, source_key: str, now: datetime) -> dict[str, str]:
    """Write the three bad snapshots next to the real ones from the real snapshot ``source_key``.

    Returns ``{manifest key: kind}``. The window is moved to ``now`` (later than any processed one), so the
    partitioner's staleness check does not hide the corruption.
    """
    manifest = SnapshotManifest.from_json(store.get(source_key) or b"", source_key)
    data = store.get(manifest.files[0].key) or b""
    now = now.replace(microsecond=0)
    moved = replace(manifest, window_end=now, window_start=now - (manifest.window_end - manifest.window_start))
    stamp = now.strftime(STAMP)
    keys: dict[str, str] = {}
    # truncated: the listed sha256 stays; the object lost its second half
    base = f"{SNAPSHOTS_PREFIX}fault-truncated-{stamp}/"
    files = []
    for i, f in enumerate(manifest.files):
        body = store.get(f.key) or b""
        store.put(base + f"part-{i:05d}.csv", body[: len(body) // 2] if i == 0 else body)
        files.append(replace(f, key=base + f"part-{i:05d}.csv"))
    store.put(base + MANIFEST, replace(moved, files=tuple(files)).to_json())
    keys[base + MANIFEST] = "truncated"
    # not a snapshot: CSV text where the manifest belongs
    key = f"{SNAPSHOTS_PREFIX}fault-not-a-snapshot-{stamp}/{MANIFEST}"
    store.put(key, data[:200])
    keys[key] = "not-a-snapshot"
    # bad rows: consistent hashes, one quadkey with a digit no quadkey has
    lines = data.decode().splitlines()
    row = lines[1].split(",")
    lines[1] = ",".join([row[0][:-1] + "7", *row[1:]])
    bad = ("\n".join(lines) + "\n").encode()
    base = f"{SNAPSHOTS_PREFIX}fault-bad-rows-{stamp}/"
    store.put(base + "part-00000.csv", bad)
    sha = _sha(bad)
    doc = replace(moved, files=(SnapshotFile(base + "part-00000.csv", len(lines) - 1, sha),), rows=len(lines) - 1,
                  checksum=manifest_checksum([sha]))
    store.put(base + MANIFEST, doc.to_json())
    keys[base + MANIFEST] = "bad-rows"
    return keys


def _desired_moved(calls: Sequence[Call], desired_after: Mapping[str, int | None], key: str) -> bool | None:
    """Whether the desired pointer moved on ``key``'s invocation (None until the notifier recorded it)."""
    index = next((i for i, c in enumerate(calls) if c.key == key), None)
    if index is None or key not in desired_after:
        return None
    before = desired_after.get(calls[index - 1].key) if index > 0 else None
    return desired_after[key] != before


class SnapshotCorrupt:
    """Inject and follow ``snapshot-corrupt`` (see the module docstring); call :meth:`poll` often."""

    def __init__(self, store: Store, calls: Callable[[], Sequence[Call]], desired_after: Mapping[str, int | None],
                 live_since: LiveSince, *, delay_s: float, deadline_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.calls = calls
        self.desired_after = desired_after
        self.clock = clock
        self._delay = LiveDelay(live_since, delay_s)
        self.record = FaultRecord("snapshot-corrupt", deadline_s=deadline_s)
        self.kinds: dict[str, str] = {}
        self.reasons: dict[str, str] = {}

    def poll(self) -> None:
        now = self.clock()
        if self.record.injected_at is None:
            real = [k for k in self.store.manifests() if _window_end(k) is not None]
            if self._delay.due(now) and real:
                self.kinds = corrupt_snapshots(self.store, real[-1], datetime.fromtimestamp(now, UTC))
                self.record.injected_at = now
                self.record.target = f"3 bad snapshots ({', '.join(KINDS)}) in the snapshots bucket"
            return
        calls = list(self.calls())
        if self.record.detected_at is None:
            self._judge(calls)
        elif self.record.recovered_at is None:
            later = [c for c in calls if c.key not in self.kinds and c.at >= self.record.detected_at
                     and outcome(c.result)[0] in JUDGED]
            if later:
                self.record.recovered_at = now
                self.record.did += f"; next good snapshot {later[0].key.split('/')[1]} {outcome(later[0].result)[0]}"

    def _judge(self, calls: Sequence[Call]) -> None:
        mine = {c.key: c for c in calls if c.key in self.kinds}
        if len(mine) < len(self.kinds) or any(key not in self.desired_after for key in mine):
            return
        for key, call in mine.items():
            status, reason, _ = outcome(call.result)
            self.reasons[self.kinds[key]] = reason or str(call.error)
            where = key.rsplit("/", 1)[0]
            if status != "rejected":
                self.record.problems.append(f"{self.kinds[key]} snapshot {key} was not rejected: {status or call.error}")
            elif "\n" in reason or where not in reason:
                self.record.problems.append(f"{self.kinds[key]} rejection is not one line naming {where}: {reason!r}")
            if _desired_moved(calls, self.desired_after, key):
                self.record.problems.append(f"the desired spec moved on the {self.kinds[key]} snapshot {key}")
        self.record.detected_at = max(c.at for c in mine.values())
        codes = ", ".join(f"{kind} -> {self.reasons[kind].split(':', 1)[0]}" for kind in KINDS if kind in self.reasons)
        self.record.did = f"rejected {codes}; live spec kept"


class SnapshotDup:
    """Inject and follow ``snapshot-dup`` (see the module docstring); call :meth:`poll` often.

    ``hold(key)`` makes the notifier skip ``key`` (marks it seen); ``deliver(key)`` invokes the partitioner handler
    with the S3 event of ``key`` and returns its result; ``mark()`` reads the window end (ISO-8601) the partitioner's
    snapshot mark names ("" before any).
    """

    def __init__(self, store: Store, calls: Callable[[], Sequence[Call]], hold: Callable[[str], None],
                 deliver: Callable[[str], Any], mark: Callable[[], str], live_since: LiveSince, *,
                 window_s: float, delay_s: float, deadline_s: float, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.calls = calls
        self.hold = hold
        self.deliver = deliver
        self.mark = mark
        self.window_s = window_s
        self.clock = clock
        self._delay = LiveDelay(live_since, delay_s)
        self.record = FaultRecord("snapshot-dup", deadline_s=deadline_s)
        self.held = ""
        self.duplicate = ""
        self.answers: dict[str, str] = {}

    def poll(self) -> None:
        now = self.clock()
        if self.record.injected_at is None:
            if self._delay.due(now):
                self._inject(now)
            return
        calls = list(self.calls())
        if "duplicate" not in self.answers:
            # a newer window the notifier judged meanwhile makes the same event stale as well: either answer keeps
            # the spec where it is
            self.answers["duplicate"] = self._redeliver(self.duplicate, ("duplicate", "stale_snapshot"))
        elif "out-of-order" not in self.answers:
            newer = [c for c in calls if c.key > self.held and _window_end(c.key) is not None
                     and outcome(c.result)[0] in JUDGED]
            if newer and self.held in self.store.manifests():
                self.answers["out-of-order"] = self._redeliver(self.held, ("stale_snapshot",))
                self.record.detected_at = now
                after = self._check_mark(newer[-1].key, now)
                self.record.did = (f"same event twice -> {self.answers['duplicate']}; older window "
                                   f"{self.held.split('/')[1]} after {newer[0].key.split('/')[1]} -> "
                                   f"{self.answers['out-of-order']}; the partitioner's mark still at {after or 'nothing'}")

    def _check_mark(self, newer: str, now: float) -> str:
        """Recovered when the mark names ``newer``'s window or a later one (the notifier only moves it forward);
        return the mark read."""
        after, want = self.mark(), _window_end(newer)
        assert want is not None
        if after >= iso(want):
            self.record.recovered_at = now
        else:
            self.record.problems.append(f"after the late delivery of {self.held} the partitioner's snapshot mark is "
                                        f"{after!r}, not at or after the judged {iso(want)!r}")
        return after

    def _inject(self, now: float) -> None:
        real = [k for k in self.store.manifests() if _window_end(k) is not None]
        judged = [c for c in self.calls() if outcome(c.result)[0] in JUDGED]
        if not real or not judged:
            return
        newest = _window_end(real[-1])
        assert newest is not None
        ahead = newest + timedelta(seconds=2 * self.window_s)
        self.held = f"{WINDOW_KEY}{ahead.strftime(STAMP)}/{MANIFEST}"
        self.hold(self.held)
        self.duplicate = judged[-1].key
        self.record.injected_at = now
        self.record.target = (f"S3 event of {self.duplicate.split('/')[1]} delivered again; "
                              f"{self.held.split('/')[1]} held back until a later window was judged")

    def _redeliver(self, key: str, expected: tuple[str, ...]) -> str:
        """Deliver ``key``'s event; the answer must be one of ``expected`` (a status or a rejection's reason code)."""
        status, reason, _ = outcome(self.deliver(key))
        answer = status if status != "rejected" else reason.split(":", 1)[0]
        if answer not in expected:
            self.record.problems.append(f"{key}: expected {' or '.join(expected)}, the partitioner said {status}: "
                                        f"{reason}")
        return answer


def snapshot_window_ends(sources: Mapping[int, Mapping[str, Any]]) -> dict[int, str]:
    """``{version: source window_end}`` of the specs built from a snapshot window, from ``{version: spec.source}``.

    A relief of the fast path (``source["relief"]``: ``partitioner.control.relief``) is built from a router's surge
    signal on the newest spec, not from a window, and names none: it is left out, so the window path's specs before
    and after it are judged against each other.
    """
    return {v: str(s.get("window_end", "")) for v, s in sources.items() if "relief" not in s}


def spec_order_problems(window_ends: Mapping[int, str]) -> list[str]:
    """Specs published twice from one snapshot or going backwards: ``{version: source window_end}`` in, problems out.

    Every published version must come from a later window than the version before it (window ends are ISO-8601
    UTC strings, which sort in time order).
    """
    problems = []
    versions = sorted(window_ends)
    for old, new in itertools.pairwise(versions):
        if not window_ends[new] > window_ends[old]:
            problems.append(f"spec v{new} comes from window {window_ends[new]!r}, not after v{old}'s "
                            f"{window_ends[old]!r} (published twice or backwards)")
    return problems
