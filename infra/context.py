"""One CDK context value as a typed setting: the key and the bad value (``!r``) in every error.

Values given on the command line (``-c max_load=5000``) arrive as strings, so numbers and booleans are parsed from
strings too. :mod:`infra.config` reads each key (its default when the context leaves it out) and passes the value
here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infra.errors import ConfigError


def as_int(value: Any, key: str, lo: int, hi: int) -> int:
    """``value`` as an integer in ``[lo, hi]`` (a bool or a float with a fraction is refused)."""
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        parsed = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"context {key!r} must be an integer, got {value!r}") from None
    if not lo <= parsed <= hi:
        raise ConfigError(f"context {key!r} must be in [{lo}, {hi}], got {value!r}")
    return parsed


def as_float(value: Any, key: str, lo: float, hi: float, *, lo_open: bool = False) -> float:
    """``value`` as a number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``; NaN and bools refused)."""
    try:
        if isinstance(value, bool):
            raise ValueError
        parsed = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"context {key!r} must be a number, got {value!r}") from None
    if parsed != parsed or not (lo < parsed if lo_open else lo <= parsed) or parsed > hi:
        bounds = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]"
        raise ConfigError(f"context {key!r} must be in {bounds}, got {value!r}")
    return parsed


def as_bool(value: Any, key: str) -> bool:
    """``value`` as a bool: ``true``/``false`` (any case) from the command line."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"context {key!r} must be true or false, got {value!r}")


def as_text(value: Any, key: str, check: Callable[[str], bool], what: str) -> str:
    """``value`` as text that passes ``check`` (``what`` says what it must be)."""
    if not isinstance(value, str) or not check(value):
        raise ConfigError(f"context {key!r} must be {what}, got {value!r}")
    return value
