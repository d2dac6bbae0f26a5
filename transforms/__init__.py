"""Your own geo transforms: modules here are copied into the worker image (``geo_service/Dockerfile``).

Name one with the ``geo_transform`` CDK setting (``-c geo_transform=transforms.geofence:Geofences``), which
becomes the workers' ``GEO_TRANSFORM``; docs/TRANSFORM.md walks through writing one. ``geofence.py`` is the
stateless worked example, ``geofence_state.py`` the stateful reference (state per entity).
"""
