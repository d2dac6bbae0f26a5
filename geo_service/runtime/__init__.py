"""The process at run time, as the operator and ECS see it.

* :mod:`~geo_service.runtime.config`: the configuration from the environment;
* :mod:`~geo_service.runtime.lifecycle`: the state machines (process, slot opened ahead);
* :mod:`~geo_service.runtime.status`: the status (the ``/health`` body) and its board;
* :mod:`~geo_service.runtime.health`: the health endpoint;
* :mod:`~geo_service.runtime.protection`: the ECS task's scale-in protection.
"""
