"""The stack as the twin runs it: synthesized once per setting that shapes it, and kept.

:func:`synthesized_template` returns the template of the CDK app (``app.py``, ``infra/``) synthesized with the
repository's ``cdk.json`` context and the run's overrides (the prefix, the swap mode, state handoff, the event
fields, the transform). It synthesizes in a child process (``python -m local.wiring.synth``: the CDK app runs on
jsii and Node.js, ~10 s) without bundling any asset (``aws:cdk:bundling-stacks`` empty: no Lambda layer or image is
built), into ``.cache/twin-synth/<key>/``, where ``key`` hashes the infra code, ``cdk.json`` and the overrides; a
later run with the same key reads the kept template.

Notes
-----
Needs the CDK Python packages of the dev venv (``requirements-dev.txt``) and Node.js; not the CDK CLI.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from local.wiring.template import TemplateError

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = REPO_ROOT / ".cache" / "twin-synth"
#: What shapes the template: the CDK app, its config and the names it shares with the code.
SOURCES = ("app.py", "cdk.json", "infra", "geokernel/contracts")
SYNTH_TIMEOUT_S = 300.0


def source_key(overrides: Mapping[str, Any], root: Path = REPO_ROOT) -> str:
    """A hash of :data:`SOURCES` (every ``.py`` and ``.json`` file under them) and ``overrides``."""
    digest = hashlib.sha256(json.dumps(dict(overrides), sort_keys=True).encode())
    for source in SOURCES:
        path = root / source
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in (".py", ".json"))
        for f in files:
            if "__pycache__" not in f.parts:
                digest.update(str(f.relative_to(root)).encode())
                digest.update(f.read_bytes())
    return digest.hexdigest()[:20]


def synthesized_template(overrides: Mapping[str, Any], cache: Path = CACHE) -> tuple[Path, float]:
    """The stack's template synthesized with ``overrides``, and the seconds the synthesis took (0 when kept)."""
    out = cache / source_key(overrides)
    found = sorted(out.glob("*.template.json")) if out.is_dir() else []
    if found:
        return found[0], 0.0
    start = time.monotonic()
    tmp = out.with_name(out.name + ".tmp")
    env = {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20,18"}
    done = subprocess.run([sys.executable, "-m", "local.wiring.synth", str(tmp), json.dumps(dict(overrides))],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=SYNTH_TIMEOUT_S, check=False)
    found = sorted(tmp.glob("*.template.json")) if tmp.is_dir() else []
    if done.returncode != 0 or not found:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise TemplateError(f"synthesizing the stack for the twin failed (exit {done.returncode}):\n{tail}")
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=False)
    tmp.rename(out)
    return sorted(out.glob("*.template.json"))[0], time.monotonic() - start


def main(argv: list[str]) -> int:
    """``python -m local.wiring.synth OUTDIR CONTEXT_JSON``: synthesize the app without bundling into OUTDIR."""
    if len(argv) != 2:
        print("usage: python -m local.wiring.synth OUTDIR CONTEXT_JSON", file=sys.stderr)
        return 2
    import aws_cdk as cdk

    from app import build_app

    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    app = cdk.App(context={**context, **json.loads(argv[1]), "aws:cdk:bundling-stacks": []}, outdir=argv[0])
    build_app(app)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
