"""Per-entity state of a stateful transform, held by the worker: :class:`EntityStates`.

A slot serving a stateful transform (:class:`~geo_service.pipeline.transform.StatefulTransform`) keeps one store; each
event's entity state is read with :meth:`EntityStates.get`, passed to ``apply_stateful`` and the returned state
written back with :meth:`EntityStates.put` (:meth:`EntityStates.applier` does the three for the batch processor,
:mod:`geo_service.serving.batches`). Values are kept as compact JSON text (written and read by the worker's codec,
:func:`geo_service.pipeline.codec.dumps_state` and :func:`~geo_service.pipeline.codec.value_of`: the text and values of
``json``, faster), so

* a value is at most :data:`MAX_STATE_BYTES` bytes of UTF-8 JSON (a bigger one is refused with a
  :class:`~geo_service.pipeline.transform.TransformError` naming the entity, the transform and the size: the event is then
  quarantined like any failing transform call, and the entity keeps its previous state);
* what a transform gets is always a fresh copy (it cannot change a stored value in place);
* :meth:`EntityStates.items` yields the texts as they would be written out: the store can be snapshotted and
  handed to another worker as it is.

With state handoff on (the router's ``STATE_HANDOFF``), the store also keeps each entity's last applied event
number (``n``), the entities it handed to another slot (``gone``: after which event) and the slot labels it serves
(``labels``: a slot and the slot it carries over share one store); :mod:`geo_service.entity.handoff` moves states between
stores, and :meth:`EntityStates.snapshot` / :meth:`EntityStates.restore` write and read them whole. A kept slot of
the same process (``carry`` mode) keeps its store (:mod:`geo_service.serving.carry`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from geo_service.pipeline.codec import dumps_state, value_of
from geo_service.pipeline.transform import (
    JsonValue,
    PreparedStatefulTransform,
    StatefulTransform,
    TransformError,
    transform_name,
)

#: Largest state of one entity, in bytes of compact UTF-8 JSON (keep it small: a worker holds one per entity it
#: serves, and a future handoff moves them between workers).
MAX_STATE_BYTES = 4096


class EntityStates:
    """The state of every entity one slot's stateful transform has seen, keyed by ``entity_id``.

    Parameters
    ----------
    transform : str
        The transform's name (``module:Class``), for error messages.
    max_bytes : int
        Largest value, in bytes of compact UTF-8 JSON (default :data:`MAX_STATE_BYTES`).

    Examples
    --------
    >>> s = EntityStates("transforms.x:X")
    >>> s.put("ent-1", {"n": 1}); s.get("ent-1")
    {'n': 1}
    >>> s.put("ent-1", None); s.get("ent-1") is None, len(s)
    (True, 0)
    """

    def __init__(self, transform: str, max_bytes: int = MAX_STATE_BYTES) -> None:
        if max_bytes <= 0:
            raise TransformError(f"max_bytes of an entity state must be > 0, got {max_bytes!r}")
        self.transform = transform
        self.max_bytes = max_bytes
        self._texts: dict[str, str] = {}
        #: Last applied event number per entity (stamped by the router; empty without state handoff).
        self.n: dict[str, int] = {}
        #: Entities handed to another slot, with the number of their last event here.
        self.gone: dict[str, int] = {}
        #: The slot labels (``v<version>#<worker>``) this store serves.
        self.labels: set[str] = set()

    def __len__(self) -> int:
        return len(self._texts)

    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self._texts

    def get(self, entity_id: str) -> JsonValue:
        """The entity's state (a fresh copy), or None when it has none."""
        text = self._texts.get(entity_id)
        return None if text is None else value_of(text)

    def put(self, entity_id: str, value: JsonValue) -> None:
        """Store the entity's state; None forgets it.

        Raises
        ------
        TransformError
            ``value`` is not JSON (a set, NaN, an object...) or its JSON is over ``max_bytes``; names the entity,
            the transform and the size. The stored state is then unchanged.
        """
        if value is None:
            self._texts.pop(entity_id, None)
            return
        try:
            text = dumps_state(value)
        except (TypeError, ValueError) as exc:
            raise TransformError(f"state of entity {entity_id!r} from transform {self.transform!r} is not JSON "
                                 f"({exc})") from None
        size = len(text.encode("utf-8"))
        if size > self.max_bytes:
            raise TransformError(f"state of entity {entity_id!r} from transform {self.transform!r} is {size} bytes "
                                 f"of JSON, over the limit of {self.max_bytes}")
        self._texts[entity_id] = text

    def items(self) -> Iterator[tuple[str, str]]:
        """``(entity_id, JSON text)`` of every stored state (a snapshot: the store may change afterwards)."""
        return iter(list(self._texts.items()))

    def text(self, entity_id: str) -> str | None:
        """The entity's state as stored (JSON text), or None."""
        return self._texts.get(entity_id)

    def take(self, entity_id: str) -> str | None:
        """Hand the entity away: forget its state and number (remembered in ``gone``); return the state's text."""
        self.gone[entity_id] = self.n.pop(entity_id, 0)
        return self._texts.pop(entity_id, None)

    def adopt(self, entity_id: str, n: int, text: str | None) -> None:
        """Take an entity's state handed over after its event ``n`` (JSON text, or None when it had none)."""
        self.gone.pop(entity_id, None)
        self.n[entity_id] = n
        if text is None:
            self._texts.pop(entity_id, None)
        else:
            self._texts[entity_id] = text

    def snapshot(self) -> dict[str, Any]:
        """Everything a successor needs: numbers, handed-away entities and states (JSON-ready)."""
        return {"n": dict(self.n), "gone": dict(self.gone), "states": dict(self._texts)}

    def restore(self, snap: Mapping[str, Any], where: str) -> None:
        """Load a :meth:`snapshot` (a takeover); :class:`TransformError` naming ``where`` if it is not one."""
        try:
            n = {str(k): int(v) for k, v in snap["n"].items()}
            gone = {str(k): int(v) for k, v in snap["gone"].items()}
            texts = {str(k): str(v) for k, v in snap["states"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise TransformError(f"state snapshot {where!r} is not a snapshot: {exc!r}") from None
        self.n, self.gone, self._texts = n, gone, texts

    def applier(self, transform: StatefulTransform) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        """A function ``event -> fields`` that runs ``transform`` on the event with its entity's state.

        The state is stored only when ``apply_stateful`` returned and the new state fits; if either raises, the
        entity keeps its previous state and the exception reaches the caller (which quarantines the event).
        """
        apply_stateful, get, put = transform.apply_stateful, self.get, self.put

        def apply(event: Mapping[str, Any]) -> dict[str, Any]:
            entity = str(event["entity_id"])
            out = apply_stateful(event, get(entity))
            put(entity, out.state)
            return out.fields

        return apply

    def prepared_applier(self, transform: PreparedStatefulTransform) -> Callable[[Mapping[str, Any], Any], dict[str, Any]]:
        """:meth:`applier` for a transform that prepared its batch: ``(event, prepared) -> fields`` runs
        ``apply_prepared`` with the entity's state and stores the new one, as :meth:`applier` does."""
        apply_prepared, get, put = transform.apply_prepared, self.get, self.put

        def apply(event: Mapping[str, Any], prepared: Any) -> dict[str, Any]:
            entity = str(event["entity_id"])
            out = apply_prepared(event, get(entity), prepared)
            put(entity, out.state)
            return out.fields

        return apply


def store_for(transform: object) -> EntityStates:
    """An empty store for ``transform`` (named ``module:Class`` in its errors)."""
    return EntityStates(transform_name(transform))
