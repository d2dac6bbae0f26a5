"""The partition spec (the layer above :mod:`geokernel.geo`): the document, its rules, and lookups over it.

* :mod:`~geokernel.partition_spec.model`: the immutable spec (partitions, workers) and its JSON form;
* :mod:`~geokernel.partition_spec.parse`: reading a spec back (decoded JSON, text, file), structure checked;
* :mod:`~geokernel.partition_spec.rules`: the rules every published spec keeps;
* :mod:`~geokernel.partition_spec.index`: point -> partition lookup (longest quadkey prefix wins);
* :mod:`~geokernel.partition_spec.shards`: the geo-stream shards of each worker and of each entity;
* :mod:`~geokernel.partition_spec.geometry`: where a spec's regions are and the shape of each.
"""
