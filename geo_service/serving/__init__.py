"""Serving slots: find, open, serve and carry over (the top room, under the process shell
:mod:`geo_service.worker`).

* :mod:`~geo_service.serving.slots`: which slot to claim next, and the slot served;
* :mod:`~geo_service.serving.context`: what one process shares between its slots;
* :mod:`~geo_service.serving.opening`: opening a claimed slot;
* :mod:`~geo_service.serving.runner`: serving one opened slot;
* :mod:`~geo_service.serving.batches`: a slot's batches, flushed and checkpointed;
* :mod:`~geo_service.serving.carry`: opening the slot's next version ahead while serving it.
"""
