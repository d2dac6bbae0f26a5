"""Load: events in, load per quadkey, and the load a spec's workers carry (above :mod:`geokernel.partition_spec`).

* :mod:`~geokernel.events`: the rules a location event must pass, and quarantine records;
* :mod:`~partitioner.load.counts`: load per quadkey (:class:`~partitioner.load.counts.Counts`), its grid and refinement;
* :mod:`~partitioner.load.read`: reading counts files and snapshot rows (with :mod:`~partitioner.load.csvscan`,
  :mod:`~partitioner.load.rowcheck` and :mod:`~partitioner.load.rollup`);
* :mod:`~partitioner.load.cost`: load weighed by the CPU cost the workers measured;
* :mod:`~partitioner.load.bound`: the fewest workers a load needs;
* :mod:`~partitioner.load.loads`: worker loads and moved load of specs under a load, every window;
* :mod:`~partitioner.control.levels` and :mod:`~partitioner.control.forecast`: smoothed cell levels, load history and
  the forecast the predictive policy sizes fleets on.
"""
