"""georebal.cli: the dispatcher, its exit statuses and one-line errors; the settings and the AWS session."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import georebal
from georebal.aws import Session, connect
from georebal.cli import COMMANDS, main, make_parser
from georebal.errors import AwsError
from tests.georebal.recorded import RecordedAws

ROOT = Path(__file__).resolve().parents[2]
CDK_JSON = ROOT / "cdk.json"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(list(args), aws=lambda region, profile: RecordedAws("raised"))
    return status, capsys.readouterr().err


def test_every_command_module_registers_its_sub_command() -> None:
    # GIVEN the dispatcher's command modules WHEN the parser is made THEN each names its sub-command
    sub = next(a for a in make_parser()._actions if a.dest == "command")
    choices = sorted(sub.choices)  # type: ignore[attr-defined]
    assert choices == ["locate", "preflight", "redrive", "replay", "smoke"] and len(COMMANDS) == 5


def test_the_module_and_the_installed_command_run() -> None:
    # GIVEN python -m georebal and the [project.scripts] target WHEN asked for their version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    module, _, func = project["scripts"]["georebal"].partition(":")
    as_module = subprocess.run([sys.executable, "-m", "georebal", "--version"], cwd=ROOT, capture_output=True,
                               timeout=60, check=False)
    code = f"import sys; sys.argv = ['georebal', '--version']; from {module} import {func}; {func}()"
    as_script = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=60, check=False)
    # THEN both print the project's version
    for proc in (as_module, as_script):
        assert proc.returncode == 0 and proc.stdout.decode().strip() == f"georebal {project['version']}"
    assert georebal.__version__ == project["version"]


@pytest.mark.parametrize(("args", "message"), [
    (["-c", "max_load"], "error: -c 'max_load': expected key=value, like the CDK CLI's -c"),
    (["-c", "max-load=5"], "error: unknown context key(s) ['max-load'] (cdk.json or -c); known keys:"),
    (["-c", "worker_cpu=300"], "error: context 'worker_cpu' must be one of [256, 512, 1024, 2048, 4096], got '300' "
                               f"(in {str(CDK_JSON)!r} or -c)"),
    (["--cdk-json", "/nonexistent/cdk.json"], "error: --cdk-json '/nonexistent/cdk.json': cannot read it (No such "
                                              "file or directory); run from the repository"),
])
def test_bad_settings_print_one_line_naming_the_value(capsys: pytest.CaptureFixture[str], args: list[str],
                                                      message: str) -> None:
    # GIVEN a bad -c pair, key or value, or no cdk.json WHEN preflight runs
    status, err = run(capsys, "preflight", "--workers", "10", "--cdk-json", str(CDK_JSON), *args)
    # THEN it exits 2 with one line naming the value and where it came from, and no traceback
    assert status == 2 and err.startswith(message) and len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_cdk_json_without_a_context_object_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # GIVEN a cdk.json whose context is a list WHEN preflight reads it THEN the file and the value are named
    bad = tmp_path / "cdk.json"
    bad.write_text('{"context": [1]}')
    status, err = run(capsys, "preflight", "--workers", "10", "--cdk-json", str(bad))
    assert status == 2 and err == f"error: --cdk-json {str(bad)!r}: 'context' must be an object, got [1]\n"


@pytest.mark.parametrize("value", ["0", "-3", "ten"])
def test_workers_must_be_a_whole_number_from_one(capsys: pytest.CaptureFixture[str], value: str) -> None:
    # GIVEN a --workers that is no worker count WHEN parsed THEN argparse exits 2 naming the option and the value
    with pytest.raises(SystemExit) as exc:
        main(["preflight", "--workers", value])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--workers" in err and repr(value) in err


def test_no_region_and_an_unknown_profile_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # GIVEN no AWS configuration at all
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    # WHEN a session is made THEN the missing region, and an unknown profile, are named
    with pytest.raises(AwsError, match=r"no AWS region: give --region or set AWS_REGION"):
        connect(None, None)
    with pytest.raises(AwsError, match=r"--profile 'nobody': "):
        connect("eu-west-1", "nobody")
    # AND AWS_REGION (the CDK CLI's; botocore reads only AWS_DEFAULT_REGION) is the region when nothing else names one
    monkeypatch.setenv("AWS_REGION", "eu-north-1")
    assert connect(None, None).region == "eu-north-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-south-1")
    assert connect(None, None).region == "eu-south-1"
    # AND with a region the session makes one client per service, with standard retries
    session = connect("eu-west-1", None)
    assert isinstance(session, Session) and session.region == "eu-west-1"
    client = session.client("kinesis")
    assert session.client("kinesis") is client and client.meta.config.retries["mode"] == "standard"
