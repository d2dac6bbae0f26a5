"""local.rejected: a snapshot whose build the partitioner rejected is kept on disk, and the CLI rebuilds it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from geokernel.contracts.control import ControlKey
from geokernel.errors import BuildError
from geokernel.partition_spec.parse import load_spec
from geokernel.partition_spec.rules import validate
from lambdas.partitioner.logic import PartitionerDeps, process_snapshot
from lambdas.runtime.records import read_desired
from local.rejected import build_rejection, keep_rejected
from partitioner.builders import build_spec
from partitioner.cli import main
from partitioner.load.read import read_counts_csv
from tests.lambdas.conftest import Aws, aws, moto_module, snapshot_rows, t, write_test_snapshot  # noqa: F401

CELLS = {(0, 0): 400, (1, 0): 300, (8, 8): 700, (9, 8): 200, (20, 3): 50}
GROWN = {**CELLS, (0, 0): 1900, (2, 0): 600}


def _failing_once_live(aws: Aws) -> tuple[PartitionerDeps, str, str]:  # noqa: F811
    """A live spec v1, then a snapshot whose every build fails as the issue's did; (deps, manifest key, reason)."""
    first = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    good = PartitionerDeps.from_config(aws.cfg, aws.clients)
    assert process_snapshot(good, first).status == "published"

    def over_cap(counts: Any, max_load: float, **kw: Any) -> Any:
        build_spec(counts, max_load, **kw)  # the real build runs, then fails as an over-cap candidate was rejected
        raise BuildError(f"spec v{kw['version']} is invalid: worker 'w0027' load 485.3 exceeds max_load {max_load!r}")

    bad = PartitionerDeps(**{**good.__dict__, "build": over_cap})
    key = write_test_snapshot(aws, snapshot_rows(GROWN), t(6), batch_id=2)
    out = process_snapshot(bad, key)
    assert (out.status, out.code) == ("rejected", "build_failed") and out.reason.startswith("build_failed: ")
    return bad, key, out.reason


def test_a_rejected_build_keeps_its_snapshot_live_spec_and_exact_input_and_the_cli_rebuilds_it(
        aws: Aws, tmp_path: Path) -> None:  # noqa: F811
    # GIVEN a snapshot whose build the partitioner rejected (build_failed) while spec v1 was live
    deps, key, reason = _failing_once_live(aws)
    marks_before = aws.control.get(ControlKey.SNAPSHOT)
    # WHEN the local loop keeps it
    kept = keep_rejected(deps, key, reason, tmp_path)
    # THEN its folder is rejected/<window_end>/ with the snapshot as stored (manifest and data files, bytes unchanged)
    folder = tmp_path / "rejected" / "2026-11-21T10-06-00Z"
    assert kept.folder == folder and kept.window_end == "2026-11-21T10:06:00Z"
    s3, bucket = aws.clients.s3, aws.cfg.snapshots_bucket
    assert (folder / "snapshot" / "_manifest.json").read_bytes() == s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    manifest = json.loads((folder / "snapshot" / "_manifest.json").read_text())
    for f in manifest["files"]:
        local = folder / "snapshot" / "data" / f["key"].rsplit("/", 1)[1]
        assert local.read_bytes() == s3.get_object(Bucket=bucket, Key=f["key"])["Body"].read()
    # AND its rows as quadkey,weight (what `partitioner build` and `simulate` read), the live spec v1 it was built
    #     from, and the build's exact input: the load the controller built on, its fill and version
    assert read_counts_csv(folder / "counts.csv").total == pytest.approx(sum(GROWN.values()))
    assert load_spec(folder / "live.json").version == 1
    build = json.loads((folder / "build.json").read_text())
    assert build["reason"] == reason and build["replay"] == "rejected the same way" == kept.replayed
    assert build["version"] == 2 and build["previous_version"] == 1 and 0 < build["fill"] <= 1
    assert build["max_load"] == 1000.0
    assert read_counts_csv(folder / "build-input.csv").total > 0
    # AND keeping it wrote nothing to the system: no new spec, the desired pointer and the snapshot mark unchanged
    assert read_desired(aws.control).version == 1  # type: ignore[union-attr]
    assert aws.control.get(ControlKey.SNAPSHOT) == marks_before
    # AND the command it prints builds that input with the live spec to the same fill
    argv = shlex.split(kept.command)
    assert argv[1:4] == ["-m", "partitioner", "build"] and str(folder / "build-input.csv") in argv
    assert main(argv[3:]) == 0
    rebuilt = load_spec(folder / "rebuilt.json")
    assert validate(rebuilt) == [] and rebuilt.version == 2 and rebuilt.previous_version == 1
    assert rebuilt.source["fill"] == build["fill"] and rebuilt.max_load == 1000.0
    assert kept.lines() == [f"  2026-11-21T10:06:00Z: {reason}",
                            f"    kept in {folder} (replay: rejected the same way)", f"    reproduce: {kept.command}"]


@pytest.mark.parametrize("result, kept", [
    ({"results": [{"status": "rejected", "code": "build_failed", "reason": "build_failed: x"}]}, "build_failed: x"),
    ({"results": [{"status": "rejected", "code": "invalid_spec", "reason": "invalid_spec: y"}]}, "invalid_spec: y"),
    ({"results": [{"status": "rejected", "code": "stale_snapshot", "reason": "stale_snapshot: z"}]}, None),
    ({"results": [{"status": "published", "code": "published", "reason": "", "version": 3}]}, None),
    ({"results": []}, None),
    (None, None),
])
def test_only_a_rejected_build_is_kept(result: Any, kept: str | None) -> None:
    # GIVEN the partitioner handler's result for one snapshot
    # WHEN the loop asks whether it rejected a build
    # THEN only build_failed and invalid_spec are (a bad or stale snapshot is not the builder's)
    assert build_rejection(result) == kept
