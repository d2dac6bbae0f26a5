"""What a Dockerfile copies from its build context, read from the Dockerfile itself.

The worker image's asset (``infra/workers.py``) stages only what its Dockerfile copies: the staged directory under
``cdk.out/asset.<hash>/`` is the build context ``cdk deploy`` hands to ``docker build``, so a ``COPY`` source the
allowlist leaves out fails the build (CDK uses the asset's ``exclude`` patterns when it stages; it does not read a
``<Dockerfile>.dockerignore``). Deriving the allowlist from the ``COPY``/``ADD`` instructions keeps one list: the
Dockerfile's.

Parsed: line continuations (``\\``), comments, the shell form (``COPY a b /dest/``) and the JSON form
(``COPY ["a", "b", "/dest/"]``), several sources per instruction, flags (``--chown=``, ``--chmod=``, ``--link``,
``--parents``, ``--exclude=``). Not from the context, so skipped: ``COPY --from=<stage or image>``, ``ADD`` of a URL
or git repository, and here-documents (``COPY <<EOF``).
https://docs.docker.com/reference/dockerfile/#copy
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path, PurePosixPath

from infra.errors import InfraError

_INSTRUCTION = re.compile(r"^\s*(COPY|ADD)\s+(.*)$", re.IGNORECASE | re.DOTALL)
_REMOTE = re.compile(r"^(https?://|git@|git://)")
# Leading flags of COPY/ADD (``--chown=10001:10001``, ``--link``), then the sources and the destination.
_FLAGS = re.compile(r"^((?:--[A-Za-z-]+(?:=\S+)?\s+)*)(.*)$", re.DOTALL)
# Never in an image: byte-code caches the build would copy along with a package.
CACHE_EXCLUDES = ("**/__pycache__", "**/*.pyc")


class DockerfileError(InfraError, ValueError):
    """A Dockerfile copies something that is not in its build context, or an instruction cannot be read."""


def logical_lines(text: str) -> list[str]:
    """The Dockerfile's instructions, one per item: comments dropped, continuation lines joined."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction is dropped, the instruction goes on
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    if pending.strip():
        lines.append(pending.strip())
    return lines


def copy_sources(text: str) -> tuple[str, ...]:
    """Every build-context path a ``COPY``/``ADD`` of ``text`` reads, in order, without repeats.

    Parameters
    ----------
    text : str
        The Dockerfile.

    Returns
    -------
    tuple of str
        Sources as written (relative to the context), e.g. ``("geo_service/requirements.txt", "geokernel/")``.
    """
    sources: list[str] = []
    for line in logical_lines(text):
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        instruction = match.group(1).upper()
        flags_match = _FLAGS.match(match.group(2).strip())
        assert flags_match is not None  # the pattern matches any text
        flags, body = flags_match.group(1).split(), flags_match.group(2).strip()
        if any(f.startswith("--from=") for f in flags):
            continue  # from another stage or image, not from the context
        args = _json_words(body, line) if body.startswith("[") else shlex.split(body)
        if len(args) < 2:
            raise DockerfileError(f"{instruction} needs at least one source and a destination, got {line!r}")
        for source in args[:-1]:
            if source.startswith("<<") or (instruction == "ADD" and _REMOTE.match(source)):
                continue
            if source not in sources:
                sources.append(source)
    return tuple(sources)


def _json_words(text: str, line: str) -> list[str]:
    try:
        words = json.loads(text)
    except ValueError:
        raise DockerfileError(f"cannot read the JSON form of {line!r}") from None
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise DockerfileError(f"the JSON form must be a list of strings, got {line!r}")
    return list(words)


def context_excludes(dockerfile: Path, context: Path) -> list[str]:
    """Exclude patterns (docker-ignore syntax) that keep exactly the Dockerfile's ``COPY`` sources and itself.

    Parameters
    ----------
    dockerfile : Path
        The Dockerfile, inside ``context``.
    context : Path
        The build context directory.

    Returns
    -------
    list of str
        ``["**", "!<source>", ..., "!<dockerfile>", "!<dockerfile>.dockerignore", *CACHE_EXCLUDES]``; a directory
        source ``d/`` becomes ``!d/`` and ``!d/**``.

    Raises
    ------
    DockerfileError
        A source that names nothing in ``context`` (the build would fail the same way), or a source outside it.
    """
    keep: list[str] = []
    for source in copy_sources(dockerfile.read_text(encoding="utf-8")):
        relative = PurePosixPath(source.lstrip("/")).as_posix()
        if relative in (".", ""):
            return list(CACHE_EXCLUDES)  # the whole context
        if ".." in PurePosixPath(relative).parts:
            raise DockerfileError(f"{dockerfile.name} copies {source!r}, outside its build context {str(context)!r}")
        if any(c in relative for c in "*?["):
            if not list(context.glob(relative)):
                raise DockerfileError(f"{dockerfile.name} copies {source!r}, which matches nothing in {str(context)!r}")
            keep.append(f"!{relative}")
            continue
        path = context / relative
        if path.is_dir():
            keep += [f"!{relative}/", f"!{relative}/**"]
        elif path.is_file():
            keep.append(f"!{relative}")
        else:
            raise DockerfileError(f"{dockerfile.name} copies {source!r}, which is not in its build context {str(context)!r}")
    own = dockerfile.resolve().relative_to(context.resolve()).as_posix()
    keep += [f"!{own}", f"!{own}.dockerignore"]
    return ["**", *dict.fromkeys(keep), *CACHE_EXCLUDES]


def missing_sources(dockerfile_text: str, staged: Path) -> list[str]:
    """The ``COPY`` sources of ``dockerfile_text`` that the staged build context ``staged`` lacks (empty: all there)."""
    missing: list[str] = []
    for source in copy_sources(dockerfile_text):
        relative = source.lstrip("/").rstrip("/") or "."
        found = list(staged.glob(relative)) if any(c in relative for c in "*?[") else [staged / relative]
        if not any(p.exists() and (not source.endswith("/") or p.is_dir()) for p in found):
            missing.append(source)
    return missing
