"""Where the partitioner keeps its controller state: one JSON object in the specs bucket.

The state (:class:`partitioner.control.controller.ControlState`: the load history per region and the last
publish time) is a few tens of KB for a global fleet (regions x the last windows), and grows with the
number of regions. DynamoDB caps an item at 400 KB including attribute names
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html, "Items"), so the
state lives in S3 instead: ``control/controller-state.json`` in the specs bucket
(:data:`geokernel.contracts.crowds.CONTROL_STATE_KEY`: the partitioner role may put that key and new specs only;
the deployer's trigger only watches ``specs/``).

Only the partitioner writes it, once per processed snapshot, after deciding and before marking the
snapshot processed; a retried snapshot is absorbed once (the history replaces a window it already holds).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from geokernel.contracts.crowds import CONTROL_STATE_KEY
from geokernel.errors import PolicyError
from lambdas.runtime.clients import error_code
from lambdas.runtime.errors import AdapterError
from partitioner.control.controller import ControlState


class ControlStateStore:
    """Load and save the controller state object."""

    def __init__(self, s3: Any, bucket: str, key: str = CONTROL_STATE_KEY) -> None:
        self._s3 = s3
        self.bucket = bucket
        self.key = key

    def load(self) -> tuple[ControlState, str]:
        """Return the stored state and "" (or a fresh state and why the stored one could not be used).

        Raises
        ------
        AdapterError
            When S3 fails for another reason than a missing object (the invocation is retried).
        """
        where = f"s3://{self.bucket}/{self.key}"
        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=self.key)["Body"].read()
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404", "NotFound"):
                return ControlState(), ""
            raise AdapterError(f"cannot read controller state {where}: {exc}") from exc
        try:
            return ControlState.from_bytes(bytes(body), where), ""
        except PolicyError as exc:
            return ControlState(), f"controller state unreadable, started afresh ({exc})"

    def save(self, state: ControlState) -> None:
        try:
            self._s3.put_object(Bucket=self.bucket, Key=self.key, Body=state.to_bytes(),
                                ContentType="application/json")
        except ClientError as exc:
            raise AdapterError(f"cannot write controller state s3://{self.bucket}/{self.key}: {exc}") from exc
