"""moto's EventBridge delivery without a parser build per event, so the geofence sink does not stall the local loop.

moto 5.2 hands every event that matches a rule to each of the rule's targets through
``moto.events.utils.EventTemplateParser.parse``, which compiles each of the eight JSONPath expressions of its
default input map (``$.detail``, ``$.source``, ...) with ``jsonpath_ng.ext.parse`` (a PLY yacc parser built anew per
call): about 7 ms of the moto server per event on an idle machine, 75 ms per ``PutEvents`` call of 10 entries. The
loop's moto server runs one request at a time (:class:`local.aws.SerialMotoServer`), so every other call of the run
(the router's puts, the leases' heartbeats) waited behind them: the first quick run with the polygon geofences, on a
2-core machine at load 15, spent 4 to 6 s per ``PutEvents`` call, a flush of 300 transitions took two and a half
minutes and the loop stalled (events out of the tail: 3,463 of 28,399).

:func:`install` puts a cache in front of ``jsonpath_ng.ext.parse``: an expression is compiled once, and its compiled
form (immutable: ``find`` reads it only) is reused. What a target receives does not change
(``tests/local/test_moto_events.py`` compares an event delivered with and without it); a ``jsonpath_ng`` without
``ext.parse`` is left alone, with one line saying so.
"""

from __future__ import annotations

import functools
from typing import Any

_INSTALLED = "_georebal_cached"
#: jsonpath_ng's own ``ext.parse``, kept by :func:`install` (the tests compare both).
ORIGINAL: dict[str, Any] = {}


def install() -> str | None:
    """Cache ``jsonpath_ng.ext.parse`` (idempotent); None when done, else why it was left alone."""
    try:
        from jsonpath_ng import ext
    except ImportError as exc:
        return f"jsonpath_ng not importable ({exc}): moto's EventBridge targets compile their paths per event"
    parse = getattr(ext, "parse", None)
    if not callable(parse):
        return "jsonpath_ng.ext has no parse: local/moto_events.py left moto's EventBridge delivery as it is"
    if getattr(parse, _INSTALLED, False):
        return None
    ORIGINAL.setdefault("parse", parse)
    cached = functools.lru_cache(maxsize=256)(parse)
    setattr(cached, _INSTALLED, True)
    setattr(ext, "parse", cached)  # noqa: B010 (mypy: the module does not re-export parse)
    return None
