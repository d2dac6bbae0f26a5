"""The smoke test of a real deployment (``python -m georebal smoke``, ``scripts/smoke-deploy``), in parts:

==============  =================================================================================================
``plan``        the tiny fleet's settings, the ``cdk deploy`` / ``cdk destroy`` command lines, the stack outputs,
                what the template retains
``events``      the probes and ticks (real cities) and how they are put to the ingest stream
``waits``       the bounded waits: a spec active, every probe in the output bucket
``checks``      the verdicts: events in vs out, the router's failure queue, AccessDenied in the logs, geo streams
``tools``       the CDK CLI, Docker and the CDK bootstrap; how a command is run (injectable)
``clock``       wall-clock time and sleeping (injectable)
``flow``        one run: deploy, send, wait, check, destroy, summary
==============  =================================================================================================
"""
