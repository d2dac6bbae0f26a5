"""The command line's inputs and outputs: ``-`` for stdin/stdout, paths checked before work, atomic writes.

Every command reads and writes through these helpers so the Unix conventions hold everywhere:

* an input path ``-`` reads standard input (at most one input per command may be ``-``);
* an output path ``-`` writes standard output, and the command's human-readable report goes to
  standard error instead (:func:`report_stream`), so ``-o - | jq`` gets only JSON;
* every output path is checked before any work starts (:func:`check_output`): its directory
  exists and it is not itself a directory, so a bad ``--json`` never leaves a spec written;
* files are written atomically (:func:`write_text`, :func:`write_via`): a temporary file in the
  same directory, renamed over the target once complete, so a failed or interrupted run
  leaves the previous file (or none) behind, never half of one.

Notes
-----
Errors are :class:`CliError` (a :class:`geokernel.errors.PartitionerError`), naming the
value and the option it came from; the CLI prints them as one line and exits 2.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from geokernel.errors import PartitionerError
from geokernel.partition_spec.model import Spec
from geokernel.partition_spec.parse import load_spec, spec_from_json
from partitioner.load.counts import Counts
from partitioner.load.read import parse_counts_csv, read_counts_csv

STDIO = "-"


class CliError(PartitionerError):
    """A command-line value the library does not check itself (bad timestamp, unwritable output)."""


def check_inputs(*named: tuple[str, str | None]) -> None:
    """Refuse more than one input read from stdin (``(option, path)`` pairs; None = not given)."""
    dashes = [opt for opt, path in named if path == STDIO]
    if len(dashes) > 1:
        raise CliError(f"only one input can be read from stdin ('-'), got {' and '.join(dashes)}")


def read_counts(path: str, option: str, *, single_zoom: bool = False) -> Counts:
    """Load per quadkey from ``path`` (``-``: standard input, named ``<stdin>`` in errors)."""
    if path == STDIO:
        return parse_counts_csv(sys.stdin.buffer.read(), f"<stdin> ({option})", allow_mixed_zoom=not single_zoom)
    return read_counts_csv(path, allow_mixed_zoom=not single_zoom)


def read_spec(path: str, option: str) -> Spec:
    """A spec from ``path`` (``-``: standard input)."""
    if path == STDIO:
        return spec_from_json(sys.stdin.buffer.read(), f"<stdin> ({option})")
    return load_spec(path)


def check_output(path: str | None, option: str, *, suffix: str | None = None) -> None:
    """Check an output path before any work: its directory exists and it is not a directory.

    ``-`` (standard output) is always fine; ``suffix`` (e.g. ``.png``) is required of files.
    """
    if path is None or path == STDIO:
        return
    p = Path(path)
    if suffix is not None and p.suffix.lower() != suffix:
        raise CliError(f"{option} {path!r} must end in {suffix}")
    if p.is_dir():
        raise CliError(f"cannot write {option} {path!r}: it is a directory")
    parent = p.resolve().parent
    if not parent.is_dir():
        raise CliError(f"cannot write {option} {path!r}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise CliError(f"cannot write {option} {path!r}: directory {str(parent)!r} is not writable")


def check_distinct(*named: tuple[str, str | None]) -> None:
    """Refuse two outputs (or an output and an input) naming the same file."""
    seen: dict[Path, str] = {}
    for opt, path in named:
        if path is None or path == STDIO:
            continue
        key = Path(path).resolve()
        if key in seen:
            raise CliError(f"{opt} {path!r} is the same file as {seen[key]}")
        seen[key] = opt


def check_one_stdout(*named: tuple[str, str | None]) -> None:
    """Refuse more than one output written to stdout."""
    dashes = [opt for opt, path in named if path == STDIO]
    if len(dashes) > 1:
        raise CliError(f"only one output can go to stdout ('-'), got {' and '.join(dashes)}")


def report_stream(*outputs: str | None) -> TextIO:
    """Where the human-readable report goes: stderr when an output is stdout, else stdout."""
    return sys.stderr if STDIO in outputs else sys.stdout


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (``-``: standard output)."""
    if path == STDIO:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_via(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_via(path: str, write: Callable[[str], object], *, suffix: str = "") -> None:
    """Call ``write(tmp)`` on a temporary file next to ``path``, then rename it over ``path``.

    The temporary file ends in ``suffix`` (default: ``path``'s), for writers that pick the format
    from it. ``-`` writes the temporary file's bytes to standard output instead (binary, e.g. a PNG).
    """
    target = Path(path)
    directory = tempfile.gettempdir() if path == STDIO else str(target.resolve().parent)
    with _temporary(directory, suffix or target.suffix) as tmp:
        try:
            write(tmp)
            if path == STDIO:
                sys.stdout.flush()
                sys.stdout.buffer.write(Path(tmp).read_bytes())
                sys.stdout.buffer.flush()
            else:
                os.replace(tmp, target)
        except OSError as exc:
            raise CliError(f"cannot write {path!r}: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def _temporary(directory: str, suffix: str) -> Iterator[str]:
    try:
        fd, tmp = tempfile.mkstemp(prefix=".partitioner-", suffix=suffix, dir=directory)
    except OSError as exc:
        raise CliError(f"cannot write in {directory!r}: {exc.strerror or exc}") from exc
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a renamed file gets the usual permissions
    try:
        yield tmp
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
