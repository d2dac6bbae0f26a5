"""The partition spec (the layer above :mod:`partitioner.geo`): the document, its rules, and lookups over it.

* :mod:`~partitioner.spec.model`: the immutable spec (partitions, workers) and its JSON form;
* :mod:`~partitioner.spec.parse`: reading a spec back (decoded JSON, text, file), structure checked;
* :mod:`~partitioner.spec.rules`: the rules every published spec keeps;
* :mod:`~partitioner.spec.index`: point -> partition lookup (longest quadkey prefix wins);
* :mod:`~partitioner.spec.shards`: the geo-stream shards of each worker and of each entity;
* :mod:`~partitioner.spec.geometry`: where a spec's regions are and the shape of each.
"""
