"""What people read about specs (above :mod:`partitioner.simulate`): metrics, text, GeoJSON and maps.

* :mod:`~partitioner.output.metrics`: a spec measured under a load (utilisation, shape, boundary load);
* :mod:`~partitioner.output.compare`: two specs compared (load kept, ids changed);
* :mod:`~partitioner.output.render`: the tables and summaries the CLI prints;
* :mod:`~partitioner.output.geojson`: a spec as GeoJSON;
* :mod:`~partitioner.output.plot` with :mod:`~partitioner.output.mapcolours` and :mod:`~partitioner.output.basemap`:
  a spec as a PNG map.
"""
