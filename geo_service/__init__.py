"""Geo Rebalancer worker: lease a worker slot of a spec version, consume its geo-stream shard,
run the geo transform, write enriched events, report measured cost per quadkey.

Entry points: :class:`geo_service.worker.GeoWorker` (in-process), ``python -m geo_service`` and the container
health probe ``python -m geo_service.healthcheck``.

Rooms (sub-packages) in layers, bottom-up; a module imports only from its own room and those below it
(``scripts/check_structure.py``). ``errors`` is the bottom layer; the other modules directly in the package are
the entry points, on top:

=============================  ================================================================================
``errors``                     the exception base, :class:`~geo_service.errors.GeoServiceError` (a module)
``adapters``                   the worker's ports to the outside, injectable for tests and the simulation
``adapters.aws``               the AWS adapter (S3, Kinesis, DynamoDB): clients, request and response shapes
``adapters.logs``              structured JSON logs on stdout, in the Lambdas' Powertools schema
``adapters.metrics``           CloudWatch EMF metrics on stdout (one line a minute), in the deployment's dimensions
``adapters.timebase``          clocks, waits and background threads (a virtual clock in the scale simulation)
``leases``                     worker-slot leases
``leases.lease``               a slot's lease in DynamoDB: claim, heartbeat, ready, checkpoint, drain, release
``leases.heartbeat``           one heartbeat thread for every lease the process holds
``pipeline``                   the parts of a record's path through a slot: read, decode, transform, time, buffer
``pipeline.consumer``          a worker's shard(s) of a geo stream: locate by hash key, resume, poll
``pipeline.records``           event decoding and the records written (enriched output, quarantine)
``pipeline.transform``         the pluggable geo transform (the interface) and the default reverse geocoder
``pipeline.coverage``          how far around a point the loaded places reach (the geocoder's exact answers)
``pipeline.data``              the geocoder's offline places (``places.csv.gz``) and the script that builds them
``pipeline.cost``              measured CPU cost per quadkey, normalised by a start-up calibration
``pipeline.buffer``            a slot's output buffer: rows not yet written and the checkpoint they reach
``entity``                     entity state: a stateful transform's state per entity
``entity.store``               the states a slot holds (:class:`~geo_service.entity.store.EntityStates`)
``entity.handoff``             state handoff: an entity's state follows it to the slot that gets its events
``swap``                       what a worker does across a swap of spec versions
``swap.control``               what a worker reads of the control table: the active version, the swap head
``swap.handover``              the handover gate: a new version's record waits for what arrived before it
``swap.handover_summary``      one item per swap that the new slots' gates read (not every old lease)
``runtime``                    the process at run time, as the operator and ECS see it
``runtime.config``             the typed configuration, read once from the environment
``runtime.lifecycle``          the state machines of the process and of a slot opened ahead
``runtime.status``             the worker's status (the ``/health`` body) and the board that holds it
``runtime.health``             the HTTP endpoint ``GET /health``
``runtime.protection``         the ECS task's scale-in protection, on while the process holds a lease
``serving``                    serving slots: find, open, serve, carry over
``serving.slots``              which slot a worker claims next, and the slot it serves
``serving.context``            what one process shares between the slots it opens and serves
``serving.opening``            opening a claimed slot (the one way from a lease to a slot it can serve)
``serving.runner``             serving one opened slot, step by step, until drain, lease lost or stop
``serving.batches``            a slot's batches: decode, locate, transform, buffer; flush, then checkpoint
``serving.carry``              carry-over: the process serving ``v<n>#w`` opens ``v<n+1>#w`` ahead
``worker``                     the process shell :class:`~geo_service.worker.GeoWorker`: claim, open, serve, stop
``__main__``                   ``python -m geo_service``: config from the environment, JSON logs, SIGTERM
``healthcheck``                ``python -m geo_service.healthcheck``: the container health probe
=============================  ================================================================================

Everything is imported from its module; the package root holds nothing but this map.
"""
