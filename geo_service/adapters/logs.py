"""Structured JSON logs: one JSON object per line on stdout, in the Lambdas' schema.

The worker logs as the Lambdas do: the line is the one Powertools ``Logger`` writes (its
``LambdaPowertoolsFormatter``), ``{"level", "location", "message", "timestamp", "service", ...fields}``, with the
event name as ``message``, :data:`SERVICE` (``geo-worker``) as ``service`` and the line's fields as top-level keys
(most carry the worker's context: ``version`` and ``worker_id`` of the slot, ``owner``, the process). One log
group query then reads the router's and the workers' lines alike.

Use :func:`log` with an event name and fields; :func:`configure` installs the JSON handler (the process entry point
calls it; in-process tests leave logging alone). :func:`read_line` is the one reader of a line (the local report
reads worker logs with it); a CloudWatch EMF line (``geo_service/adapters/metrics.py``) shares the stream and is no
log line.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime
from typing import Any, TextIO

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from geokernel.contracts.metric_names import MetricService

LOGGER_NAME = "geo_service"
#: The ``service`` of every worker log line (and the service dimension of its metrics).
SERVICE = MetricService.WORKER.value
#: The keys of a line that say what happened and when (Powertools' names).
EVENT_KEY, TIME_KEY = "message", "timestamp"
#: Fields that would overwrite a ``logging.LogRecord`` attribute (or a key of the schema) get this suffix.
_RENAMED = "_field"
_RESERVED = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "location", "timestamp", "level",
                                                          "service"}


def get_logger(name: str = LOGGER_NAME) -> logging.Logger:
    return logging.getLogger(name)


def log(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    """Log ``event`` with structured ``fields`` (each a top-level key of the line)."""
    extra = {(f"{k}{_RENAMED}" if k in _RESERVED else k): v for k, v in fields.items()}
    logger.log(level, event, extra=extra, stacklevel=2)  # ``location``: the caller's function and line


def formatter() -> logging.Formatter:
    """The Powertools formatter of the Lambdas' ``Logger``, with the worker's ``service`` (UTC timestamps, as in
    Lambda)."""
    return LambdaPowertoolsFormatter(service=SERVICE, utc=True)


def configure(stream: TextIO | None = None, level: int = logging.INFO) -> None:
    """Send the ``geo_service`` logger's records to ``stream`` (stdout) as JSON lines."""
    logger = get_logger()
    for h in list(logger.handlers):
        logger.removeHandler(h)
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(formatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


def read_line(line: str) -> dict[str, Any] | None:
    """The log line ``line`` as a dict, or None for anything else (an EMF metrics line, a stray print, a torn line)."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and EVENT_KEY in doc and "_aws" not in doc else None


def line_time(doc: dict[str, Any]) -> float | None:
    """Epoch seconds of a line read by :func:`read_line` (None when its timestamp does not parse)."""
    try:
        return datetime.fromisoformat(str(doc.get(TIME_KEY))).timestamp()
    except ValueError:
        return None
