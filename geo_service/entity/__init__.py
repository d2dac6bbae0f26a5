"""Entity state: the per-entity state of a stateful transform (the layer above :mod:`geo_service.pipeline`).

* :mod:`~geo_service.entity.store`: the states a slot holds;
* :mod:`~geo_service.entity.handoff`: state handoff, an entity's state following it to its next slot.
"""
