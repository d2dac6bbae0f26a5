"""Keep a snapshot whose build the partitioner rejected, so that the CLI can reproduce the build after the run.

The loop's snapshots live in moto's S3 and are gone when the run ends. When the partitioner handler answers a
snapshot with a rejected build (:data:`BUILD_REJECTIONS`: ``build_failed``, the builder raised, e.g. a candidate over
its own cap; ``invalid_spec``, the candidate broke a rule of the spec), :func:`keep_rejected` writes into
``<out>/rejected/<window_end>/``:

``snapshot/_manifest.json``, ``snapshot/data/*.csv``
    The snapshot as stored (bytes unchanged; the manifest's keys still name the bucket's layout).
``counts.csv``
    Its rows as ``quadkey,weight`` (the weight the partitioner balances: cost when the snapshot has it, else events):
    ``python -m partitioner build`` and ``simulate`` read it.
``live.json``
    The live spec the build was given as ``previous`` (absent on a cold start).
``build-input.csv``, ``build.json``
    The exact load and fill of the build that was rejected: the controller builds on its forecast, not on the rows,
    so the harness takes the partitioner's step again on the same stores with a recording builder
    (:func:`lambdas.partitioner.logic.replay_step`, which writes nothing) and keeps the last build's input.
    ``build.json`` holds the reason, ``max_load``, ``fill``, version, whether the replay was rejected the same way,
    and the command.

:attr:`KeptSnapshot.command` is the CLI line that builds ``build-input.csv`` to the same fill with the same live spec
(``python -m partitioner build ... --fill F --previous live.json``); the report prints it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from geokernel.errors import PartitionerError
from geokernel.partition_spec.model import Spec
from lambdas.partitioner.logic import PartitionerDeps, replay_step
from lambdas.partitioner.snapshot import SnapshotRejected, parse_manifest, read_rows
from partitioner.load.counts import Counts
from partitioner.load.read import read_snapshot_rows

#: The rejection codes of a build (the others reject the snapshot itself: a bad manifest, a stale window, ...).
BUILD_REJECTIONS = ("build_failed", "invalid_spec")
#: Where the kept snapshots go, under the run's output folder.
REJECTED_DIR = "rejected"


@dataclass(frozen=True)
class BuildCall:
    """The input of one build the partitioner made: its load, cap, fill, live spec and version."""

    counts: Counts
    max_load: float
    fill: float
    previous: Spec | None
    version: int | None


@dataclass
class _Recorder:
    """A builder that records each call's input and builds with ``inner`` (the partitioner's own builder)."""

    inner: Callable[..., Spec]
    calls: list[BuildCall] = field(default_factory=list)

    def __call__(self, counts: Counts, max_load: float, *, previous: Spec | None = None, version: int | None = None,
                 stream_name: str | None = None, fill: float = 1.0) -> Spec:
        self.calls.append(BuildCall(counts, float(max_load), float(fill), previous, version))
        return self.inner(counts, max_load, previous=previous, version=version, stream_name=stream_name, fill=fill)


@dataclass(frozen=True)
class KeptSnapshot:
    """A rejected build's snapshot kept on disk: where, why, and the command that reproduces the build."""

    window_end: str
    folder: Path
    reason: str
    command: str
    replayed: str  # what the replay of the step did: "rejected the same way", or how it differed

    def lines(self) -> list[str]:
        """The report's lines for this snapshot."""
        return [f"  {self.window_end}: {self.reason}", f"    kept in {self.folder} (replay: {self.replayed})",
                f"    reproduce: {self.command}"]

    def to_dict(self) -> dict[str, Any]:
        return {"window_end": self.window_end, "folder": str(self.folder), "reason": self.reason,
                "command": self.command, "replayed": self.replayed}


def build_rejection(result: Any) -> str | None:
    """The reason of a rejected build in the partitioner handler's result for one manifest, else None."""
    if isinstance(result, dict) and isinstance(result.get("results"), list) and result["results"]:
        r = result["results"][0]
        if r.get("status") == "rejected" and r.get("code") in BUILD_REJECTIONS:
            return str(r.get("reason") or r.get("code"))
    return None


def keep_rejected(deps: PartitionerDeps, manifest_key: str, reason: str, out: Path,
                  python: str = ".venv/bin/python") -> KeptSnapshot:
    """Write the snapshot of a rejected build under ``out/rejected/<window_end>/`` (see the module docstring).

    Parameters
    ----------
    deps : PartitionerDeps
        The partitioner's stores, read as the harness (the replay writes nothing); its ``build`` is wrapped.
    manifest_key : str
        The snapshot's manifest key.
    reason : str
        The reason the handler gave.
    out : Path
        The run's output folder.
    python : str
        The interpreter the printed command names.

    Returns
    -------
    KeptSnapshot

    Raises
    ------
    SnapshotRejected
        When the snapshot cannot be read back (it was rejected for its build, so it could be read once).
    """
    raw = deps.snapshots.read(manifest_key)
    if raw is None:
        raise SnapshotRejected("missing_file", f"manifest {manifest_key!r} is gone: cannot keep it")
    manifest = parse_manifest(raw, manifest_key)
    window = manifest.record.window_end.strftime("%Y-%m-%dT%H-%M-%SZ")
    folder = out / REJECTED_DIR / window
    _copy_snapshot(deps, manifest_key, raw, folder / "snapshot")
    counts = read_snapshot_rows(read_rows(deps.snapshots, manifest), manifest_key, use_cost=manifest.record.has_cost)
    _write_counts(folder / "counts.csv", counts)
    recorder = _Recorder(deps.build)
    replayed = _replay(replace(deps, build=recorder), manifest_key, reason)
    call = recorder.calls[-1] if recorder.calls else None
    target = folder / "counts.csv"
    if call is not None:
        target = folder / "build-input.csv"
        _write_counts(target, call.counts)
        if call.previous is not None:
            call.previous.save(folder / "live.json")
    command = _command(python, target, call, deps.max_load, folder)
    (folder / "build.json").write_text(json.dumps(
        {"manifest": manifest_key, "reason": reason, "max_load": deps.max_load,
         "fill": call.fill if call else None, "version": call.version if call else None,
         "previous_version": call.previous.version if call and call.previous else None,
         "builds_in_step": len(recorder.calls), "replay": replayed, "command": command}, indent=1) + "\n")
    return KeptSnapshot(manifest.record.window_end_iso, folder, reason, command, replayed)


def _copy_snapshot(deps: PartitionerDeps, manifest_key: str, raw: bytes, to: Path) -> None:
    """Copy the manifest and its data files, at their paths relative to the snapshot's prefix."""
    base = manifest_key.rsplit("/", 1)[0] + "/"
    to.mkdir(parents=True, exist_ok=True)
    (to / "_manifest.json").write_bytes(raw)
    for f in parse_manifest(raw, manifest_key).record.files:
        key = f.key if "/" in f.key else base + f.key
        data = deps.snapshots.read(key)
        if data is None:
            raise SnapshotRejected("missing_file", f"{manifest_key}: listed file {key!r} is gone: cannot keep it")
        rel = key[len(base):] if key.startswith(base) else "data/" + key.rsplit("/", 1)[-1]
        (to / rel).parent.mkdir(parents=True, exist_ok=True)
        (to / rel).write_bytes(data)


def _write_counts(path: Path, counts: Counts) -> None:
    """``quadkey,weight`` rows, each weight written so that it reads back exactly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("quadkey,weight\n" + "".join(f"{q},{float(w)!r}\n" for q, w in
                                                  zip(counts.quadkeys, counts.weights.tolist(), strict=True)))


def _replay(deps: PartitionerDeps, manifest_key: str, reason: str) -> str:
    """Take the partitioner's step again (writing nothing); say whether it was rejected with the same reason."""
    try:
        step = replay_step(deps, manifest_key)
    except SnapshotRejected as exc:
        return "rejected the same way" if str(exc) == reason else f"rejected differently: {exc}"
    except PartitionerError as exc:
        return f"failed: {type(exc).__name__}: {exc}"
    return "not rejected this time: " + "; ".join(step.decision.reasons)[:300]


def _command(python: str, counts: Path, call: BuildCall | None, max_load: float, folder: Path) -> str:
    """The CLI line that builds ``counts`` as the rejected build did (to its fill, with its live spec)."""
    argv = [python, "-m", "partitioner", "build", str(counts), "--max-load", repr(float(max_load))]
    if call is not None:
        argv += ["--fill", repr(call.fill)]
        if call.previous is not None:
            argv += ["--previous", str(folder / "live.json")]
        if call.version is not None:
            argv += ["--version", str(call.version)]
    argv += ["-o", str(folder / "rebuilt.json")]
    return shlex.join(argv)
