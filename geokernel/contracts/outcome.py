"""OutcomeStatus: what the partitioner did with a snapshot or a surge signal.

The one set of names its handler returns (``{"results": [{"status": ...}]}``), the partitioner counts by
(:data:`geokernel.contracts.metric_names.PARTITIONER_OUTCOME_METRICS`), and the local loop and its report read back
(``local.outcomes``).
"""

from __future__ import annotations

from enum import StrEnum


class OutcomeStatus(StrEnum):
    """The ``status`` of one snapshot's or one surge signal's outcome.

    Notes
    -----
    ``HELD``: the policy said no (a snapshot), or there was nothing to move (a surge signal). ``SUPERSEDED``: another
    version was published concurrently (``desired`` moved while this one was built), so this one was not.
    """

    PUBLISHED = "published"
    HELD = "held"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"
