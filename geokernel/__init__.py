"""Geo Rebalancer's kernel: what every part ships (the worker image, the Spark job, each Lambda, the CDK app).

Pure: no AWS SDK, no Spark; NumPy only in the geometry and the spec index (the contracts load none). Sub-packages
in layers, bottom-up; a module imports only from its own layer and those below it (``scripts/check_structure.py``):

==================  =======================================================================================
``errors``          the exception base, :class:`~geokernel.errors.PartitionerError`, and its kinds
``contracts``       the records the parts exchange (names, keys, codecs); imports nothing but ``errors``
``geo``             tiles and quadkeys, quadtree arithmetic, adjacency, region shapes, polygons
``partition_spec``  the spec (model, reading, rules), the point -> partition index, shards, region geometry
``aws_budget``      every AWS call counted against its quota
``timestamps``      the time unit rule on one ``ts`` value: its epoch ms or its quarantine reason (a module)
``events``          the rules a location event must pass (a module, on top; reads ``ts`` with ``timestamps``)
==================  =======================================================================================

Everything is imported from its module; the package root holds nothing but this map.
"""
