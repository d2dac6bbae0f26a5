"""Structured JSON logs: one JSON object per line on stdout.

Use :func:`log` with an event name and fields; :func:`configure` installs the JSON
handler (the process entry point calls it; in-process tests leave logging alone).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

LOGGER_NAME = "geo_service"


class JsonFormatter(logging.Formatter):
    """Format a record as ``{"ts", "level", "logger", "event", ...fields}``."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            body.update(fields)
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str, separators=(",", ":"))


def get_logger(name: str = LOGGER_NAME) -> logging.Logger:
    return logging.getLogger(name)


def log(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    """Log ``event`` with structured ``fields``."""
    logger.log(level, event, extra={"fields": fields})


def configure(stream: TextIO | None = None, level: int = logging.INFO) -> None:
    """Send the ``geo_service`` logger's records to ``stream`` (stdout) as JSON lines."""
    logger = get_logger()
    for h in list(logger.handlers):
        logger.removeHandler(h)
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
