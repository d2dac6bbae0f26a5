"""The sub-commands of ``python -m georebal``, one module each (:mod:`georebal.cli` registers them): each has
``add_parser(sub)``, which sets ``func(args, connect) -> exit status`` on its parser (``connect`` makes the AWS
session, :data:`georebal.aws.Connect`).

:mod:`~georebal.commands.preflight` (the account's level quotas against the configured fleet),
:mod:`~georebal.commands.smoke` (a tiny deployment on a sandbox account, checked end to end, then destroyed).
"""
