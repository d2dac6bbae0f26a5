"""The twin wired from the synthesized stack, not from a copy of its settings.

* :mod:`~local.wiring.synth`: the CDK app synthesized with the run's settings (kept per key in ``.cache``);
* :mod:`~local.wiring.template`: the template, and its intrinsic functions evaluated with the twin's names;
* :mod:`~local.wiring.stack_wiring`: the parts' roles, the event source mapping, the S3 notifications and the
  encryption keys, as records the loop builds its stand-ins for AWS from.
"""
