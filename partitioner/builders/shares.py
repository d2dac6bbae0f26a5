"""How a build note states a load: its true share of ``max_load``, and of the cap the build packs to where that differs.

A build packs to ``cap = max_load x fill`` (:class:`partitioner.builders.protocol.BuildRequest`), and the repair's
decisions (re-carve, split, give up a tile, shave) are taken against that cap. A note that divided by the cap and
called it "of max_load" overstated every share by ``1 / fill``: at fill 0.8, "100% of max_load" was 80 % of it. So
a note prints the load's share of ``max_load`` itself, and, when the fill is below 1, its share of the cap too::

    >>> of_max_load(260.0, cap=320.0, fill=0.8)
    '65% of max_load, 81% of the cap (fill 80%)'
    >>> of_max_load(260.0, cap=400.0, fill=1.0)
    '65% of max_load'
"""

from __future__ import annotations

import math

from geokernel.errors import BuildError


def of_max_load(load: float, cap: float, fill: float, digits: int = 0) -> str:
    """``load`` as a share of ``max_load`` (``cap / fill``) and, for a fill below 1, of ``cap`` too.

    Parameters
    ----------
    load : float
        The load to state.
    cap : float
        The cap the build packs to (``max_load x fill``, > 0).
    fill : float
        The build's fill in (0, 1].
    digits : int
        Decimals of the percentages.

    Returns
    -------
    str
        ``"N% of max_load"``, or ``"N% of max_load, M% of the cap (fill F%)"`` when ``fill < 1``.

    Raises
    ------
    BuildError
        For a ``cap`` that is not positive and finite, or a ``fill`` outside (0, 1].
    """
    if not (math.isfinite(cap) and cap > 0):
        raise BuildError(f"cap must be a positive finite number, got {cap!r}")
    if not 0 < fill <= 1:
        raise BuildError(f"fill must be in (0, 1], got {fill!r}")
    text = f"{load * fill / cap:.{digits}%} of max_load"
    if fill < 1:
        text += f", {load / cap:.{digits}%} of the cap (fill {fill:.0%})"
    return text
