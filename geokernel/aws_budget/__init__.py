"""An AWS API budget: every call the system makes, counted per quota and second, held against AWS's documented
quotas (:mod:`.quotas`), with the usage rules per call (:mod:`.usage`), the counting hooks (:mod:`.calls`) and the
report (:mod:`.report`); and the quotas on a level (running vCPU, network interfaces, shards, concurrency) with what
a configured fleet needs of each (:mod:`.levels`, checked by ``python -m georebal preflight``). No boto3 here:
:func:`.calls.watch` takes a botocore event emitter."""
