"""The fault names of ``--faults``, and which of them a swap mode can have."""

from __future__ import annotations

from local.errors import LocalRunError

FAULTS = ("worker-kill", "spark-kill", "deployer-crash", "snapshot-corrupt", "snapshot-dup", "stream-throttle",
          "put-partial", "hook-fail", "hook-timeout")
WHOLE_ONLY = ("hook-fail", "hook-timeout")  # lifecycle hooks run only in ECS blue/green deployments (whole mode)


class FaultError(LocalRunError, ValueError):
    """A bad ``--faults`` value; the message names it."""


def parse_faults(text: str, swap_mode: str = "carry") -> tuple[str, ...]:
    """``all`` or a comma list of :data:`FAULTS` (empty = none); raise FaultError naming a bad name.

    ``all`` is every fault that can happen in ``swap_mode``: the hook faults (:data:`WHOLE_ONLY`) only in ``whole``
    mode, where swaps are ECS blue/green deployments with lifecycle hooks (a ``carry`` swap changes the desired count
    only, so no hook runs); naming one in ``carry`` mode is an error."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return FAULTS if swap_mode == "whole" else tuple(f for f in FAULTS if f not in WHOLE_ONLY)
    bad = [n for n in names if n not in FAULTS]
    if bad:
        raise FaultError(f"--faults: unknown fault(s) {bad!r}; known: {', '.join(FAULTS)} or all")
    hooks = [n for n in names if n in WHOLE_ONLY]
    if hooks and swap_mode != "whole":
        raise FaultError(f"--faults: {', '.join(hooks)} needs --swap-mode whole (got {swap_mode!r}): lifecycle hooks "
                         f"run only in ECS blue/green deployments, and a carry swap changes the desired count only")
    return tuple(dict.fromkeys(names))
