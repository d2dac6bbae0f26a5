"""Where the deployed controller finds declared crowds and keeps its state: objects under ``control/`` in the specs
bucket.

The operator writes the crowds (``aws s3 cp crowds.json s3://<specs bucket>/control/crowds.json``, format in
:mod:`partitioner.control.crowds`); the partitioner Lambda reads it once per snapshot window. No object means no declared
crowd; a bad one rejects the window's snapshot (``bad_crowds``) and leaves the live spec as it was.
"""

from __future__ import annotations

#: S3 key of the declared crowds in the specs bucket
CROWDS_KEY = "control/crowds.json"
#: S3 key of the partitioner's controller state in the specs bucket (written by the partitioner only,
#: ``lambdas.partitioner.state``; the stack lets it put this one key besides new specs)
CONTROL_STATE_KEY = "control/controller-state.json"
