"""The end-of-run report: what happened, whether it was right, and the files that show it.

:func:`local.report.collect.collect_live` reads from the live moto server what the report
needs (snapshot manifests and rows, quarantine records, cost reports) before teardown, and keeps
the enriched output and the snapshots in ``<out>/s3/`` as a deployment's buckets lay them out;
:func:`local.report.finish.finish` computes the sections and invariants, prints
``report.txt``, writes ``report.json``, the specs (JSON and GeoJSON), the PNG figures, and
returns the exit code.

The report leads with **utilisation measured at the workers** (:mod:`~local.report.worker_load`:
the events each worker process received per window (sent in the window, processed by it),
the same events by the write time of its output with the lag between the two, and the CPU
its cost reports measured). The snapshot's view of the same load (the "mismatch" of an old
spec under a new snapshot, :mod:`~local.report.specs`) follows as a secondary section,
labelled as an estimate.

Invariants (exit 1 when one breaks):

* **delivery**: every valid event sent comes out of the workers after dedupe by
  ``event_id``; nothing comes out that was not sent; no enriched line is unreadable.
* **lease safety**: no lease changed owner while the previous owner still held it
  (:class:`local.observe.ControlObserver`).
* **flip safety**: ``active`` never moved to a version before all its leases were
  owned, unexpired and ready.
* **served**: the version ``active`` names (the router's target) never went longer than one
  lease duration without a lease held by a running worker process (``ControlObserver``); a span that an injected
  ``hook-timeout`` opens (ECS stops the live version's tasks) is held to that fault's deadline instead.
* **cap, at the workers**: at most 2 % of worker-windows over the cap and none above
  110 % of it (:data:`local.report.worker_load.MAX_OVER_CAP_SHARE`, ``MAX_UTILISATION``; what a
  worker-window is: :mod:`local.report.worker_load`). No worker-window at all fails it.
* **components**: the Spark job, the loops and the handlers ran without a fatal error,
  and the tail drained before the timeout.
* **swaps** (:mod:`local.report.swaps`, :mod:`local.report.swap_checks`): never two readers of one cell at once; each entity's
  records of one version processed before any of a later one; in ``carry`` mode the median
  swap keeps at least 80 % of its slots in their processes. The swap section lists each
  swap's carried / started / stopped slots, moved cells and extra worker-seconds, and the
  swap timings (``report.json`` ``swaps``, ``swap_timings``).
* **AWS budget** (:mod:`local.calls`): every AWS API at or below half its documented quota.
* **oracle** (:mod:`local.report.reference`): every record's fields equal a single-process run of the transform.
* **output as a data product** (:mod:`local.report.product`): pyarrow, reading each hour's ``dt=/hour=`` folder of
  the kept output alone, finds every event of the hour once, as many as the oracle's events of that hour.

Modules: :mod:`~local.report.finish` (the whole report, in order), :mod:`~local.report.utilisation`,
:mod:`~local.report.flips`, :mod:`~local.report.specs`, :mod:`~local.report.swaps`,
:mod:`~local.report.invariants`, :mod:`~local.report.product` (the sections), :mod:`~local.report.worker_load` and
:mod:`~local.report.swap_checks` (what they measure), :mod:`~local.report.figures` (the
utilisation figure), :mod:`~local.report.collect` (what is read before teardown).
"""
