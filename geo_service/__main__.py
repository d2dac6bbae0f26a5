"""Run one geo worker as a process: ``python -m geo_service``.

Configuration comes from environment variables (names in :mod:`geo_service.runtime.config`):
``SPEC_VERSION`` (required), ``WORKER_ID`` (optional: else any free slot), ``CONTROL_TABLE``,
``LEASES_TABLE``, ``SPECS_BUCKET``, ``COSTS_BUCKET``, ``OUTPUT_BUCKET``, ``QUARANTINE_BUCKET``,
``GEO_PREFIX``, ``AWS_ENDPOINT_URL`` (moto), ``LEASE_S``, ``DRAIN_QUIET_S``,
``COST_REPORT_INTERVAL_S``, ``HEALTH_PORT`` (0 = off), ``GEO_TRANSFORM``, ``GRID_ZOOM``,
``POLL_INTERVAL_S``, ``ACTIVE_POLL_S``, ``BUFFER_RING``.

Logs are JSON lines on stdout in the Lambdas' Powertools schema (:mod:`geo_service.adapters.logs`), with a CloudWatch
EMF line every ``METRICS_INTERVAL_S`` (:mod:`geo_service.adapters.metrics`). SIGTERM or SIGINT releases the lease
gracefully. Exit status: 0 after drain, release on request, or when every slot of the version is already drained; 1 on
a failure (the log says why); 2 on a configuration error.
"""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType

from geo_service.adapters.aws import make_clients
from geo_service.adapters.logs import configure, get_logger, log
from geo_service.runtime.config import ConfigError, WorkerConfig
from geo_service.worker import GeoWorker


def main() -> int:
    configure()
    logger = get_logger()
    try:
        config = WorkerConfig.from_env()
    except ConfigError as exc:
        log(logger, logging.ERROR, "config_error", error=str(exc))
        return 2
    worker = GeoWorker(config, make_clients(config.endpoint_url, config.region))

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log(logger, logging.INFO, "signal", signal=signal.Signals(signum).name, owner=worker.owner)
        worker.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    code = worker.run()
    st = worker.status()
    log(logger, logging.INFO, "exit", code=code, state=st.state, records_read=st.records_read,
        events_out=st.events_out, strays=st.strays, quarantined=st.quarantined)
    return code


if __name__ == "__main__":
    sys.exit(main())
