"""The contracts between the parts: every record two parts exchange, its stored form, and the shared names.

The partitioner Lambda, the deploy Lambdas, the router, the geo workers, the Spark job and the local loop all
write or read these; each is defined here once, with its codec, and imported from its module, so a change cannot
reach one side only. ``docs/CONTRACTS.md`` lists every contract with its writers, readers and defining code.

* :mod:`~geokernel.contracts.snapshot`: the load snapshot (layout, data files, ``_manifest.json``).
* :mod:`~geokernel.contracts.spec_pointer`: spec objects and the control items ``desired`` and ``active``.
* :mod:`~geokernel.contracts.control`: control-table keys, deploy states, the partitioner's control items.
* :mod:`~geokernel.contracts.plan`: swap modes, the deploy plan (``plan``) and its head (``swap``).
* :mod:`~geokernel.contracts.lease`: the leases table (slot leases, handover summary key).
* :mod:`~geokernel.contracts.stream`: geo stream names and their shard map.
* :mod:`~geokernel.contracts.cost`, :mod:`~geokernel.contracts.enriched`,
  :mod:`~geokernel.contracts.quarantine`: what the workers (and the Spark job, the router) write.
* :mod:`~geokernel.contracts.events`: event rules and quarantine reason codes; :mod:`~geokernel.contracts.event_fields`:
  the event field mapping (with ``ts_unit``); :mod:`~geokernel.contracts.timestamps`: the time unit rule's units,
  bounds and plausible window.
* :mod:`~geokernel.contracts.dynamo`, :mod:`~geokernel.contracts.fields`,
  :mod:`~geokernel.contracts.errors`: the codecs' plumbing (:class:`ContractError` is the package's one error).

This package sits on ``geokernel.errors`` alone: it imports nothing else of ``partitioner`` and no AWS or Spark library,
so both images (the Lambdas' and the workers') and the Spark job ship it as is.

Stored strings never change: every enum is a :class:`enum.StrEnum` whose values are the strings already in
buckets, streams and tables, and every codec writes the bytes the parts wrote before it existed.

Everything is imported from its module; the package root holds nothing but this map.
"""
