"""The parts of a record's path through a slot: read, decode, transform, time, buffer (the write and the
checkpoint are :mod:`geo_service.serving.batches`, on top).

* :mod:`~geo_service.pipeline.consumer`: a worker's shard(s) of a geo stream;
* :mod:`~geo_service.pipeline.records`: event decoding, enriched and quarantine records;
* :mod:`~geo_service.pipeline.transform`: the pluggable geo transform and the default reverse geocoder (its
  places in ``data/``, the reach of the loaded ones in :mod:`~geo_service.pipeline.coverage`);
* :mod:`~geo_service.pipeline.cost`: measured CPU cost per quadkey;
* :mod:`~geo_service.pipeline.buffer`: a slot's output buffer.
"""
