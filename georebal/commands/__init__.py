"""The sub-commands of ``python -m georebal``, one module each (:mod:`georebal.cli` registers them): each has
``add_parser(sub)``, which sets ``func(args, connect) -> exit status`` on its parser (``connect`` makes the AWS
session, :data:`georebal.aws.Connect`).

:mod:`~georebal.commands.preflight` (the account's level quotas against the configured fleet),
:mod:`~georebal.commands.smoke` (a tiny deployment on a sandbox account, checked end to end, then destroyed);
the day-after tools: :mod:`~georebal.commands.locate` (where the router sends an event, and who holds that slot),
:mod:`~georebal.commands.replay` (events again into the ingest stream, from an archive or the stream itself),
:mod:`~georebal.commands.redrive` (the router's failed batches back onto the ingest stream).
"""
