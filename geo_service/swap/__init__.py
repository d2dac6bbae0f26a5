"""What a worker does across a swap of spec versions (the layer above :mod:`geo_service.pipeline` and
:mod:`geo_service.leases`; the carry-over is :mod:`geo_service.serving.carry`).

* :mod:`~geo_service.swap.control`: the active version and the swap head;
* :mod:`~geo_service.swap.handover`: the handover gate, per record;
* :mod:`~geo_service.swap.handover_summary`: the one item per swap the new slots' gates read.
"""
