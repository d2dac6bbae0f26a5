"""Worker-slot leases (the layer above :mod:`geo_service.adapters`).

* :mod:`~geo_service.leases.lease`: a slot's lease in DynamoDB (claim, heartbeat, ready, checkpoint, drain, release);
* :mod:`~geo_service.leases.heartbeat`: one heartbeat thread for every lease the process holds.
"""
