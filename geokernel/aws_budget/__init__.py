"""An AWS API budget: every call the system makes, counted per quota and second, held against AWS's documented
quotas (:mod:`.quotas`), with the usage rules per call (:mod:`.usage`), the counting hooks (:mod:`.calls`) and the
report (:mod:`.report`). No boto3 here: :func:`.calls.watch` takes a botocore event emitter."""
