"""The CLI as a Unix tool: bad input refused before anything is written, '-' for stdin/stdout, quiet pipes and
Ctrl-C, exit codes a script can use, --version, -q/-v, any working directory, the installed command.

Most tests run the real command in a subprocess (``python -m partitioner``), as a user or a script would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

import partitioner
from geokernel.partition_spec.parse import load_spec
from geokernel.partition_spec.rules import validate
from partitioner.cli import main
from partitioner.commands.demo import DEMO_MAX_LOAD, SAMPLE_COUNTS
from partitioner.commands.exits import EXIT_DIFFERENT, EXIT_REDEPLOY

ROOT = Path(__file__).resolve().parents[2]
SMALL = "quadkey,weight\n0231,4\n0232,5\n"


def cli(*args: str, cwd: Path | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m partitioner ARGS`` in a fresh process (from ``cwd``; the repository on PYTHONPATH)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "partitioner", *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, timeout=120, check=False)


def one_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The single ``error: ...`` line of a failed run (asserting exit 2 and nothing else on stderr)."""
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


@pytest.fixture(scope="module")
def sample_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("unix") / "v1.json"
    assert main(["build", str(SAMPLE_COUNTS), "--max-load", str(DEMO_MAX_LOAD), "-o", str(out), "-q"]) == 0
    return out


# ---------------------------------------------------------------------------
# bad input: one line naming the value and where it came from, exit 2, nothing written
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "needles"), [
    ("quadkey,weight\n,3\n0231,4\n", ["line 2", "empty quadkey"]),  # was a traceback (negative shift count)
    ("quadkey,weight\n,5\n", ["line 2", "empty quadkey"]),  # root only: was an 894-character spec error
    ("quadkey,weight\n0231,4\n" + "0" * 25 + ",1\n", ["line 3", "'" + "0" * 25 + "'", "zoom 25", "24"]),
    ("quadkey,weight\n0231,4\n02310,10\n", ["line 2", "'0231'", "'02310' on line 3", "weight 4", "10"]),
])
def test_bad_counts_are_refused_naming_file_line_and_value(tmp_path: Path, text: str, needles: list[str]) -> None:
    # GIVEN a counts file with one bad row
    counts = tmp_path / "bad.csv"
    counts.write_text(text)
    # WHEN built
    proc = cli("build", str(counts), "--max-load", "10", "-o", str(tmp_path / "spec.json"))
    # THEN one line names the file, the line and the value; nothing is written
    err = one_error_line(proc)
    assert "bad.csv" in err
    for needle in needles:
        assert needle in err
    assert not (tmp_path / "spec.json").exists()


def test_a_rolled_up_quadtree_whose_rows_hold_their_sub_cells_is_accepted(tmp_path: Path) -> None:
    counts = tmp_path / "tree.csv"
    counts.write_text("quadkey,weight\n0231,14\n02310,10\n023101,3\n0232,5\n")
    assert main(["build", str(counts), "--max-load", "10", "-o", str(tmp_path / "s.json"), "-q"]) == 0


def test_version_not_above_previous_is_refused_and_nothing_written(sample_spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "v2.json"
    # WHEN --version repeats the previous spec's version (was: "v1 -> v1" and a spec written)
    proc = cli("build", str(SAMPLE_COUNTS), "--max-load", "2500", "-o", str(out), "--previous", str(sample_spec),
               "--version", "1")
    # THEN
    err = one_error_line(proc)
    assert "--version 1" in err and "v1.json" in err and "(v1)" in err
    assert not out.exists()


@pytest.mark.parametrize(("max_load", "needle"), [("0.001", "29,497,"), ("25", "1,180 workers")])
def test_a_max_load_needing_absurd_worker_counts_is_refused(tmp_path: Path, max_load: str, needle: str) -> None:
    # WHEN the cap is far below the load (was: minutes of silence, or 1,286 workers quietly)
    t0 = time.monotonic()
    proc = cli("build", str(SAMPLE_COUNTS), "--max-load", max_load, "-o", str(tmp_path / "s.json"))
    # THEN refused at once, naming the value, the workers it needs and the limit
    err = one_error_line(proc)
    assert f"--max-load {max_load}" in err and needle in err and "--max-workers 1,000" in err
    assert time.monotonic() - t0 < 60
    assert not (tmp_path / "s.json").exists()


def test_max_workers_raises_the_limit(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    assert main(["build", str(SAMPLE_COUNTS), "--max-load", "100", "-o", str(out), "--max-workers", "400", "-q"]) == 0
    assert len(load_spec(out).workers) <= 400


def test_an_unwritable_json_path_is_refused_before_the_spec_is_written(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    proc = cli("build", str(SAMPLE_COUNTS), "--max-load", "2500", "-o", str(spec), "--json", "/nonexistent/m.json")
    err = one_error_line(proc)
    assert "--json '/nonexistent/m.json'" in err and "does not exist" in err
    assert not spec.exists()


def test_plot_mismatch_without_counts_is_refused_before_drawing(sample_spec: Path, tmp_path: Path) -> None:
    png, bars = tmp_path / "map.png", tmp_path / "bars.png"
    proc = cli("plot", str(sample_spec), "-o", str(png), "--mismatch", str(bars))
    err = one_error_line(proc)
    assert "--mismatch" in err and "bars.png" in err and "COUNTS" in err
    assert not png.exists() and not bars.exists()


def test_a_failed_build_leaves_the_previous_output_untouched(tmp_path: Path) -> None:
    # GIVEN an existing spec file
    out = tmp_path / "spec.json"
    out.write_text("previous content\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("quadkey,weight\n0231,x\n")
    # WHEN a build from bad counts fails
    assert main(["build", str(bad), "--max-load", "10", "-o", str(out)]) == 2
    # THEN the file is as it was and no temporary file is left behind
    assert out.read_text() == "previous content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "spec.json"]


def test_two_inputs_from_stdin_are_refused(sample_spec: Path) -> None:
    err = one_error_line(cli("diff", "-", "-", stdin=sample_spec.read_bytes()))
    assert "OLD and NEW" in err


# ---------------------------------------------------------------------------
# stdin and stdout
# ---------------------------------------------------------------------------


def test_build_reads_stdin_and_writes_the_spec_to_stdout(tmp_path: Path) -> None:
    # WHEN counts come on stdin and the spec goes to stdout
    proc = cli("build", "-", "--max-load", "10", "-o", "-", cwd=tmp_path, stdin=SMALL.encode())
    # THEN stdout is only the spec's JSON, the report is on stderr, and no file named '-' appears
    assert proc.returncode == 0, proc.stderr.decode()
    spec = json.loads(proc.stdout)
    assert spec["format"] == "geo-rebalancer.spec/1"
    assert "Total partitions:" in proc.stderr.decode()
    assert not (tmp_path / "-").exists()


def test_evaluate_json_to_stdout_writes_only_json(sample_spec: Path) -> None:
    proc = cli("evaluate", str(SAMPLE_COUNTS), str(sample_spec), "--json", "-")
    assert proc.returncode == 0
    metrics = json.loads(proc.stdout)  # nothing but the JSON
    assert metrics["lower_bound"] == 12
    assert "Partition p0001" in proc.stderr.decode()


def test_evaluate_reads_the_spec_from_stdin(sample_spec: Path) -> None:
    proc = cli("evaluate", str(SAMPLE_COUNTS), "-", "-q", stdin=sample_spec.read_bytes())
    assert proc.returncode == 0 and "Total partitions:" in proc.stdout.decode()


def test_geojson_and_plot_write_stdout(sample_spec: Path) -> None:
    gj = cli("geojson", str(sample_spec), "-o", "-")
    assert gj.returncode == 0 and json.loads(gj.stdout)["type"] == "FeatureCollection"
    png = cli("plot", str(sample_spec), "-o", "-", "-q")
    assert png.returncode == 0 and png.stdout[:4] == b"\x89PNG" and b"wrote" not in png.stdout


@pytest.mark.parametrize("args", [["evaluate", str(SAMPLE_COUNTS), "{spec}", "-q"],
                                  ["evaluate", str(SAMPLE_COUNTS), "{spec}", "--json", "-", "-q"],
                                  ["geojson", "{spec}", "-q"]])
def test_a_closed_pipe_ends_quietly(sample_spec: Path, args: list[str]) -> None:
    # GIVEN stdout is a pipe whose reader has already gone away (| head after it exited)
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [a.replace("{spec}", str(sample_spec)) for a in args]
    try:
        proc = subprocess.run([sys.executable, "-m", "partitioner", *argv], env=env, stdout=write_end,
                              stderr=subprocess.PIPE, timeout=120, check=False)
    finally:
        os.close(write_end)
    # THEN no traceback, and the status says the pipe closed (128 + SIGPIPE)
    err = proc.stderr.decode()
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode == 141


def test_ctrl_c_ends_quietly() -> None:
    # GIVEN a command waiting for counts on stdin
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "partitioner", "build", "-", "--max-load", "10", "-o", "-", "-v"],
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stderr is not None
    first = p.stderr.readline().decode()  # -v names the step: it is reading stdin now
    assert first.startswith("build: reading -"), first
    # WHEN interrupted
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    # THEN one word on stderr, no traceback, exit 130
    assert "Traceback" not in err.decode() and p.returncode == 130, err.decode()
    assert err.decode().strip() == "interrupted"


# ---------------------------------------------------------------------------
# exit codes, --version, -q/-v, working directory, installed command
# ---------------------------------------------------------------------------


def test_diff_exit_status_says_whether_the_specs_differ(sample_spec: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    assert main(["build", str(SAMPLE_COUNTS), "--max-load", "2000", "-o", str(other), "-q"]) == 0
    assert cli("diff", str(sample_spec), str(sample_spec)).returncode == 0
    assert cli("diff", str(sample_spec), str(other)).returncode == EXIT_DIFFERENT == 1


def test_policy_exit_status_says_keep_or_redeploy(sample_spec: Path, tmp_path: Path) -> None:
    # GIVEN twice the load: the live spec is overloaded and a candidate built for it fits
    rows = SAMPLE_COUNTS.read_text().splitlines()[1:]
    double = tmp_path / "double.csv"
    double.write_text("quadkey,weight\n" + "".join(f"{q},{2 * float(w)}\n" for q, w in (r.split(",") for r in rows)))
    candidate = tmp_path / "v2.json"
    assert main(["build", str(double), "--max-load", "2500", "-o", str(candidate), "-q"]) == 0
    when = ["--now", "2026-11-21T12:00:00Z", "--last-published", "2026-11-20T12:00:00Z"]
    # THEN keep is 0 and redeploy is 3
    assert cli("policy", str(sample_spec), str(sample_spec), str(SAMPLE_COUNTS), *when).returncode == 0
    redeploy = cli("policy", str(sample_spec), str(candidate), str(double), *when)
    assert redeploy.returncode == EXIT_REDEPLOY == 3, redeploy.stdout.decode()
    assert redeploy.stdout.decode().startswith("decision: REDEPLOY")


def test_version_prints_the_package_version() -> None:
    proc = cli("--version")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert proc.returncode == 0 and proc.stdout.decode().strip() == f"partitioner {project['version']}"
    assert partitioner.__version__ == project["version"]


def test_verbose_prints_steps_and_quiet_prints_nothing_on_stderr(tmp_path: Path) -> None:
    counts = tmp_path / "c.csv"
    counts.write_text(SMALL)
    verbose = cli("build", str(counts), "--max-load", "10", "-o", str(tmp_path / "a.json"), "-v")
    steps = verbose.stderr.decode().splitlines()
    assert verbose.returncode == 0 and steps[0].startswith("build: reading") and steps[-1].startswith("build: done")
    quiet = cli("build", str(counts), "--max-load", "10", "-o", str(tmp_path / "b.json"), "-q")
    assert quiet.returncode == 0 and quiet.stderr == b""


def test_the_cli_runs_from_any_directory(tmp_path: Path) -> None:
    # GIVEN a working directory outside the repository and relative paths
    (tmp_path / "c.csv").write_text(SMALL)
    # WHEN built and the demo run there
    build = cli("build", "c.csv", "--max-load", "10", "-o", "s.json", "-q", cwd=tmp_path)
    demo = cli("demo", "--out", "d", cwd=tmp_path)
    # THEN the files land in that directory
    assert build.returncode == 0 and validate(load_spec(tmp_path / "s.json")) == []
    assert demo.returncode == 0 and (tmp_path / "d" / "map.png").exists(), demo.stderr.decode()


def test_the_installed_command_is_declared_and_runs(tmp_path: Path) -> None:
    # GIVEN pyproject's console script
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = project["project"]["scripts"]["partitioner"]
    module, _, func = target.partition(":")
    # WHEN the script's target runs as the installed wrapper would (from another directory)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = f"import sys; sys.argv = ['partitioner', '--version']; from {module} import {func}; {func}()"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, timeout=60,
                          check=False)
    # THEN it prints the version and exits 0; setuptools accepts the project table
    assert proc.returncode == 0 and proc.stdout.decode().startswith("partitioner ")
    from setuptools.config.pyprojecttoml import read_configuration

    config = read_configuration(ROOT / "pyproject.toml")
    assert config["project"]["scripts"] == {"partitioner": "partitioner.cli:run", "georebal": "georebal.launch:run"}


@pytest.mark.parametrize(("option", "value"), [("--limit", "-5"), ("--max-workers", "0"), ("--version", "0"),
                                               ("--version", "x")])
def test_counts_in_options_must_be_whole_numbers_from_one(tmp_path: Path, option: str, value: str) -> None:
    out = tmp_path / "s.json"
    proc = cli("build", str(SAMPLE_COUNTS), "--max-load", "2500", "-o", str(out), option, value)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and option in err and repr(value) in err and "Traceback" not in err
    assert not out.exists()


def test_simulate_json_to_stdout_writes_only_json(tmp_path: Path) -> None:
    # GIVEN five windows of counts
    windows = tmp_path / "w"
    windows.mkdir()
    for k in range(5):
        (windows / f"w{k}.csv").write_text(f"quadkey,weight\n0231,{4 + k}\n0232,{5 - k}\n")
    # WHEN simulated with the JSON on stdout
    proc = cli("simulate", str(windows), "--max-load", "10", "--window-s", "60", "--strategies", "floor,default",
               "--json", "-", "-q")
    # THEN stdout is the JSON alone and the table is on stderr
    assert proc.returncode == 0, proc.stderr.decode()
    assert set(json.loads(proc.stdout)["strategies"]) == {"floor", "default"}
    assert "floor" in proc.stderr.decode()
