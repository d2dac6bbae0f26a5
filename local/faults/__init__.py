"""Faults the local loop injects (``--faults``), and what it measures about the recovery.

Each fault is an injector with a :class:`~local.faults.record.FaultRecord` (injected, detected, recovered, what the
system did, broken promises) that the loop polls while it runs:

``worker-kill`` (:mod:`~local.faults.worker_kill`)
    ``kill -9`` of a worker process mid-swap; its leases must be taken over.
``spark-kill`` (:mod:`~local.faults.spark_kill`)
    ``kill -9`` of the Spark job; restarted on its checkpoint, it must write a snapshot again.
``deployer-crash`` (:mod:`~local.faults.deployer_crash`)
    The deployer dies inside a swap's fleet start; a later step must finish the swap.
``snapshot-corrupt``, ``snapshot-dup`` (:mod:`~local.faults.snapshots`)
    Bad, duplicate and out-of-order snapshots the partitioner must refuse.
``stream-throttle`` (:mod:`~local.faults.stream_throttle`)
    The local AWS refuses a share of the geo streams' calls for a while.
``hook-fail``, ``hook-timeout`` (:mod:`~local.faults.hooks`, ``--swap-mode whole`` only)
    An ECS lifecycle hook invocation fails before or after the flip, and ECS rolls the deployment back.

:mod:`~local.fault_names` parses ``--faults``; :mod:`~local.faults.arm` wires the injectors to a running loop and
:mod:`~local.faults.follow` polls them and writes the fault table (``faults.json``). A fault whose promise broke
(:attr:`~local.faults.record.FaultRecord.problems`) fails the run like one that did not recover in time.
"""
