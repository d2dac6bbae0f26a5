"""Where the deployed controller finds declared crowds: one JSON object in the specs bucket.

The operator writes it (``aws s3 cp crowds.json s3://<specs bucket>/control/crowds.json``, format in
:mod:`partitioner.control.crowds`); the partitioner Lambda reads it once per snapshot window. No object means no declared
crowd; a bad one rejects the window's snapshot (``bad_crowds``) and leaves the live spec as it was.
"""

from __future__ import annotations

#: S3 key of the declared crowds in the specs bucket
CROWDS_KEY = "control/crowds.json"
