"""The fast path's detection: count events per grid cell over short intervals and say when a worker heads past its cap.

* :mod:`~geokernel.surge.view`: a spec as the meter sees it (which worker holds each cell, what each was planned to
  carry, the cap and the window);
* :mod:`~geokernel.surge.meter`: :class:`~geokernel.surge.meter.SurgeMeter` keeps the last intervals' counts per cell
  and gives a :class:`~geokernel.contracts.surge.SurgeSignal` for each worker a surge is taking past its cap;
* :mod:`~geokernel.surge.buckets`: the router's side, events grouped into the meter's intervals by time.

The router runs it in each execution environment on the events it routes (``lambdas.router.surge``), the simulator on
the ticks of its windows (``partitioner.simulate.fastpath``): the same code decides in both. Pure: no AWS library.
"""
