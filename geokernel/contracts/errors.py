"""The one exception base of the contract package: a stored record that does not decode.

Every codec here raises :class:`ContractError` naming the record, the field and the bad value; it is a
:class:`~geokernel.errors.PartitionerError` (the library's one base) and a :class:`ValueError`, so callers that caught ``ValueError`` from the codecs before keep working. Each side maps it
to its own error where it needs a code (the partitioner Lambda's ``SnapshotRejected``, the worker's
``ControlError``).
"""

from __future__ import annotations

from geokernel.errors import PartitionerError


class ContractError(PartitionerError, ValueError):
    """A stored record (S3 object, DynamoDB item, key) does not follow its contract; the message names the value."""
