"""Exit statuses of ``python -m georebal`` (see :mod:`georebal.cli`)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # smoke: a check failed (or the deploy did); replay/redrive: records not put, or gone (named)
EXIT_ERROR = 2  # bad input or arguments; preflight: a quota does not fit, or could not be read
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_PIPE = 141  # 128 + SIGPIPE
