"""What the partitioner handler answered for a snapshot: read from its result, for the run's lines and the report.

The handler (``lambdas.partitioner.handler``) answers an S3 event with ``{"results": [{"status", "reason", "code",
"version"}]}``, one entry per manifest (``code``: the reason's code, e.g. ``build_failed`` for a rejected build); the
local loop delivers one manifest per event.
"""

from __future__ import annotations

import json
from typing import Any


def outcome(result: Any) -> tuple[str, str, int | None]:
    """(status, reason, version) of the partitioner handler's result for one manifest.

    Status is ``published``, ``held`` (the policy declined), ``duplicate``, ``rejected`` or
    ``superseded`` (:class:`lambdas.partitioner.logic.Outcome`).
    """
    if isinstance(result, dict) and isinstance(result.get("results"), list) and result["results"]:
        r = result["results"][0]
        version = r.get("version")
        return str(r.get("status")), str(r.get("reason") or ""), version if isinstance(version, int) else None
    return "unknown", json.dumps(result, default=str)[:160], None


def summarise(result: Any) -> str:
    """One line from the partitioner handler's ``{"results": [{"status", "reason", "version"}]}``."""
    if isinstance(result, dict) and isinstance(result.get("results"), list):
        parts = [f"{r.get('status')}" + (f" v{r['version']}" if r.get("version") else "")
                 + (f": {r['reason']}" if r.get("reason") else "") for r in result["results"]]
        return "; ".join(parts) or "no manifest in the event"
    return json.dumps(result, default=str)[:200]
