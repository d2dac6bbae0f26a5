"""The geofence event bus: which names and ARNs an EventBridge bus may have, shared by the stack's setting
(``geofence_event_bus``, :mod:`infra.config`) and the worker's ``GEOFENCE_EVENT_BUS``
(:mod:`geo_service.runtime.config`).

Notes
-----
A bus name is 1 to 256 letters, digits and ``._-/``
(https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_CreateEventBus.html). Names beginning with ``aws.``
are AWS's partner event sources, which take no custom events: the stack refuses them; the worker takes a name or the
bus's ARN.
"""

from __future__ import annotations

import re

__all__ = ["BUS_NAME_RE", "BUS_RE"]

#: A bus name the stack may be given (``geofence_event_bus``): not one of AWS's ``aws.`` buses.
BUS_NAME_RE = re.compile(r"^(?!aws\.)[/._\-A-Za-z0-9]{1,256}$")
#: A bus the worker may put on (``GEOFENCE_EVENT_BUS``): a name or an event bus ARN.
BUS_RE = re.compile(r"^([/._\-A-Za-z0-9]{1,256}|arn:aws[a-z-]*:events:[a-z0-9-]+:\d{12}:event-bus/[/._\-A-Za-z0-9]+)$")
