"""Geo Rebalancer worker: lease a worker slot of a spec version, consume its geo-stream shard,
run the geo transform, write enriched events, report measured cost per quadkey.

Entry points: :class:`geo_service.worker.GeoWorker` (in-process) and ``python -m geo_service``.
"""
