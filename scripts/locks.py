"""The lock files: which ``.in`` ranges resolve into which lock, for which Python and platform, and how.

Every environment the project installs is installed from a LOCK: exact versions (``==``) with the sha256 of every
file PyPI has for each (``--hash``), generated from its ``.in`` file of ranges (which keeps the reason for each range)
by uv (``uv pip compile --generate-hashes``), the uv version pinned in ``requirements-uv.in``. A fresh clone then
installs what the tests ran, not whatever the ranges allow that day (moto 5.2.6 broke the local loop that way).
The lock keeps the name the environment always installed (``requirements-dev.txt``, ...), so every consumer keeps its
path; its header names its ``.in`` source.

    scripts/lock                 re-resolve every lock to the newest versions its ranges allow; prints what changed
    scripts/lock --keep          keep every pin the ranges still allow (after adding a package to a .in file)
    scripts/check-latest         the newest versions in a throwaway venv, with the fast tests and the quick loop

Commands of this module (the scripts above call them): ``lock [--keep]``, ``latest DIR`` (every lock resolved anew
into DIR, printing how it differs from the committed one) and ``uv`` (print the pinned uv's path, installing it into
``.cache/uv`` from ``requirements-uv.txt`` when missing). Network: PyPI, at lock time only.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UV_SOURCE = "requirements-uv.in"
UV_LOCK = "requirements-uv.txt"
UV_DIR = ROOT / ".cache" / "uv"
# A universal lock holds every platform's and Python version's pins (markers); its floor is the venvs' Python.
UNIVERSAL = None


@dataclass(frozen=True)
class Lock:
    """One environment: ``source`` (the ``.in`` ranges) resolved into ``lock`` for ``python`` on ``platform``.

    ``platform`` is a uv target (``aarch64-manylinux_2_28``) or :data:`UNIVERSAL`; ``constraints`` are other locks
    this one must agree with (``-c``); ``binary_only``: resolve to versions with wheels only (a target that is not
    this machine cannot build an sdist, and ``pip download --platform`` takes wheels only).
    """

    source: str
    lock: str
    purpose: str
    python: str
    platform: str | None = UNIVERSAL
    constraints: tuple[str, ...] = ()
    binary_only: bool = False

    def args(self, constraints: dict[str, str] | None = None) -> list[str]:
        """The ``uv pip compile`` arguments but the output file (``constraints`` maps a lock to its stand-in)."""
        # fewest: one version of a package for every Python the universal lock covers where one fits, not the newest
        # for each (numpy 2.5 for 3.12+ beside 2.4 for 3.11): the image (3.12) then gets what the tests ran on 3.11
        target = (["--universal", "--fork-strategy", "fewest"] if self.platform is UNIVERSAL
                  else ["--python-platform", self.platform])
        args = [self.source, "--generate-hashes", "--python-version", self.python, *target]
        for other in self.constraints:
            args += ["-c", (constraints or {}).get(other, other)]
        return [*args, *(["--only-binary", ":all:"] if self.binary_only else [])]


# In order: a lock comes after those it is constrained by.
LOCKS = (
    Lock("requirements-dev.in", "requirements-dev.txt",
         ".venv, the dev venv (tests, the local loop, the gate); installed by scripts/bootstrap.sh python", "3.11"),
    Lock("requirements.in", "requirements.txt",
         "the CDK app's runtime alone (pip install -r requirements.txt), at the dev lock's versions", "3.11",
         constraints=("requirements-dev.txt",)),
    Lock("requirements-spark35.in", "requirements-spark35.txt",
         ".venv-spark35, the Spark 3.5 line (Glue 5.1); installed by scripts/bootstrap.sh spark35", "3.11"),
    Lock("requirements-checkov.in", "requirements-checkov.txt",
         ".venv-checkov (scripts/synth-check); installed by scripts/bootstrap.sh checkov", "3.11"),
    Lock("requirements-lambda.in", "requirements-lambda.txt",
         "the Lambda layer (runtime python3.14, arm64): downloaded by scripts/bootstrap.sh lambda-wheels, installed "
         "offline by infra/assets.py at synth", "3.14", "aarch64-manylinux_2_28", binary_only=True),
    Lock("geo_service/requirements.in", "geo_service/requirements.txt",
         "the geo worker image (python:3.12-slim on Fargate X86_64, infra/workers.py); installed by "
         "geo_service/Dockerfile", "3.12", "x86_64-manylinux_2_28", constraints=("requirements-dev.txt",)),
    Lock(UV_SOURCE, UV_LOCK, "the uv behind scripts/lock and scripts/check-latest (.cache/uv)", "3.11"),
)


class LockError(RuntimeError):
    """A lock cannot be made or read; the message names the file and what to do."""


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)\s*(?:;\s*(.*?))?\s*\\?$")


def normalize(name: str) -> str:
    """PEP 503 name: ``Aws_CDK.lib`` -> ``aws-cdk-lib``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, list[str]]:
    """``{name: ["1.2.3", "2.0 ; python_full_version >= '3.12'", ...]}`` of a lock (a universal lock may fork)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = _PIN.match(line.strip())
        if match:
            name, version, marker = match.groups()
            found.setdefault(normalize(name), []).append(f"{version} ; {marker}" if marker else version)
    return found


def requirement_names(source: Path) -> set[str]:
    """The package names a ``.in`` file asks for, with those of the files it reads (``-r``)."""
    names: set[str] = set()
    for raw in source.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ")):
            names |= requirement_names(source.parent / line.split(maxsplit=1)[1])
        elif line.startswith("-"):
            raise LockError(f"{source}: option {line!r} belongs in scripts/locks.py's LOCKS, not in the .in file")
        else:
            names.add(normalize(re.split(r"[\[<>=!~; ]", line, maxsplit=1)[0]))
    return names


def changes(old: dict[str, list[str]], new: dict[str, list[str]]) -> list[str]:
    """What moved between two locks' pins: ``moto 5.2.5 -> 5.2.6``, ``+ six 1.17.0``, ``- old 1.0``."""
    lines = []
    for name in sorted(old.keys() | new.keys()):
        before, after = " | ".join(old.get(name, [])), " | ".join(new.get(name, []))
        if before == after:
            continue
        lines.append(f"+ {name} {after}" if not before else f"- {name} {before}" if not after
                     else f"{name} {before} -> {after}")
    return lines


def header(lock: Lock, uv_version: str) -> str:
    where = "any platform (universal resolution)" if lock.platform is UNIVERSAL else lock.platform
    return (
        f"# LOCK FILE, generated by scripts/lock: do not edit. Change the ranges in {lock.source}, then run scripts/lock.\n"
        f"# Source: {lock.source}\n"
        f"# For: {lock.purpose}\n"
        f"# Target: Python {lock.python}, {where}. Exact versions, each with the sha256 of every file PyPI has for it:\n"
        f"#   pip checks them (--require-hashes) and fails on a file that differs or a package the lock lacks.\n"
        f"# Made by uv {uv_version}: uv pip compile {' '.join(lock.args())}\n"
    )


def uv_version() -> str:
    """The uv version ``requirements-uv.in`` pins (exactly: ``uv==X``)."""
    match = re.search(r"^uv==(\S+)", (ROOT / UV_SOURCE).read_text(encoding="utf-8"), re.MULTILINE)
    if match is None:
        raise LockError(f"{UV_SOURCE} must pin uv exactly (uv==X): a new uv can resolve or format differently")
    return match.group(1)


def ensure_uv() -> Path:
    """The pinned uv (``requirements-uv.txt``, hash-checked), in ``.cache/uv``; installed there when missing."""
    uv = UV_DIR / "bin" / "uv"
    want = hashlib.sha256((ROOT / UV_LOCK).read_bytes()).hexdigest()[:16]
    stamp = UV_DIR / ".stamp"
    if uv.is_file() and stamp.is_file() and stamp.read_text().strip() == want:
        return uv
    print(f"[lock] installing uv {uv_version()} into {UV_DIR.relative_to(ROOT)} (from {UV_LOCK})", file=sys.stderr)
    venv.create(UV_DIR, with_pip=True, clear=True)
    done = subprocess.run([str(UV_DIR / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "--require-hashes", "-r", str(ROOT / UV_LOCK)], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not uv.is_file():
        raise LockError(f"installing uv from {UV_LOCK} into {UV_DIR} failed:\n{done.stderr}")
    stamp.write_text(want + "\n")
    return uv


def compile_lock(uv: Path, lock: Lock, out: Path, *, upgrade: bool, constraints: dict[str, str] | None = None) -> None:
    """Resolve ``lock.source`` into ``out`` (with the header); ``upgrade=False`` keeps the pins ``out`` already has."""
    # --no-header: ours names the source and the target; uv never downloads a Python (no network but PyPI): the
    # target version only selects wheels and markers
    command = [str(uv), "pip", "compile", *lock.args(constraints), "--no-header", "--no-python-downloads", "--quiet",
               "-o", str(out), *(["--upgrade"] if upgrade else [])]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LockError(f"resolving {lock.source} into {out} failed (uv pip compile {' '.join(lock.args(constraints))}):"
                        f"\n{done.stderr.strip()}")
    out.write_text(header(lock, uv_version()) + out.read_text(encoding="utf-8"), encoding="utf-8")


def lock_all(*, keep: bool) -> int:
    """Regenerate every lock in place; print what moved in each."""
    uv = ensure_uv()
    for lock in LOCKS:
        path = ROOT / lock.lock
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        staged = path.with_name(path.name + ".new")
        staged.write_text(old, encoding="utf-8")  # uv keeps the pins of its output file unless --upgrade
        try:
            compile_lock(uv, lock, staged, upgrade=not keep)
        except LockError:
            staged.unlink()
            raise
        staged.replace(path)
        moved = changes(pins(old), pins(path.read_text(encoding="utf-8")))
        print(f"{lock.lock} (from {lock.source}): " + (f"{len(moved)} change(s)" if moved else "unchanged"))
        for line in moved:
            print(f"    {line}")
    return 0


def latest(out: Path) -> int:
    """Resolve every ``.in`` anew (newest allowed) into ``out``; print how each differs from the committed lock."""
    uv = ensure_uv()
    out.mkdir(parents=True, exist_ok=True)
    stand_ins = {lock.lock: str(out / lock.lock.replace("/", "__")) for lock in LOCKS}
    for lock in LOCKS:
        target = Path(stand_ins[lock.lock])
        target.unlink(missing_ok=True)
        compile_lock(uv, lock, target, upgrade=True, constraints=stand_ins)
        moved = changes(pins((ROOT / lock.lock).read_text(encoding="utf-8")), pins(target.read_text(encoding="utf-8")))
        print(f"{lock.lock}: " + (f"{len(moved)} newer than the lock" if moved else "the lock is the newest"))
        for line in moved:
            print(f"    {line}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/locks.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    lock = commands.add_parser("lock", help="regenerate every lock from its .in file")
    lock.add_argument("--keep", action="store_true", help="keep every pin the ranges still allow (no upgrade)")
    newest = commands.add_parser("latest", help="resolve every .in anew into DIR and print what differs")
    newest.add_argument("dir", type=Path)
    commands.add_parser("uv", help="print the pinned uv's path (installing it when missing)")
    args = parser.parse_args(argv)
    try:
        if args.command == "lock":
            return lock_all(keep=args.keep)
        if args.command == "latest":
            return latest(args.dir)
        print(ensure_uv())
        return 0
    except LockError as exc:
        print(f"[lock] {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
