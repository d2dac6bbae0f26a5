"""Exit statuses of ``python -m partitioner`` (see :mod:`partitioner.cli`)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_DIFFERENT = 1  # diff: the specs differ
EXIT_ERROR = 2
EXIT_REDEPLOY = 3  # policy: the candidate would be published
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_PIPE = 141  # 128 + SIGPIPE
