"""Geo Rebalancer operations: tools that look at, or act on, a deployment in an AWS account (boto3 allowed here).

Builds on the kernel (:mod:`geokernel`), the partitioner library and the deployment's settings as ``cdk synth``
reads them (:mod:`infra.config`, from ``cdk.json`` and ``-c key=value``; no CDK construct is imported). Run it as
``python -m georebal COMMAND`` (:mod:`georebal.cli`, a small dispatcher), one module per command under
:mod:`georebal.commands`:

=============  ==============================================================================================
``preflight``  the account's level quotas against the configured fleet, with a 2x margin, before a deploy
``smoke``      deploy a tiny fleet to a sandbox account, send events, check none is lost, destroy it
               (:mod:`georebal.smoke`)
``locate``     where the router sends an event at a point: partition, worker, geo stream, shard, hash key, and
               the slot's lease holder now (:mod:`georebal.locating`)
``replay``     events again into the ingest stream, from an archive (:mod:`georebal.archive`) or a time range
               of the stream (:mod:`georebal.ingest`), paced and in per-entity order (:mod:`georebal.puts`)
``redrive``    the records of the router's failed batches (its failure queue, :mod:`georebal.failures`) back
               onto the ingest stream (:mod:`georebal.redriving`)
=============  ==============================================================================================

What the commands share: :mod:`georebal.aws` (the AWS session, injectable for tests), :mod:`georebal.settings`
(the deployment's settings), :mod:`georebal.deployment` (a deployed stack's resource names, from its outputs),
:mod:`georebal.progress` (a progress line every few seconds), :mod:`georebal.errors` (the one exception base).
"""

__version__ = "0.2.0"  # the project version in pyproject.toml (a test keeps them equal)
