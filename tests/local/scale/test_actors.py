"""local.scale.actors: what the simulated router counts for an invocation it does not send."""

from __future__ import annotations

from lambdas.runtime.kinesis import PutEntry
from local.scale.actors import put_rounds


def test_a_stamped_batch_goes_out_in_rounds_of_one_event_per_entity() -> None:
    # GIVEN a batch where car-1 has three events, car-2 one and car-3 two
    batch = [PutEntry(str(i).encode(), e, "1") for i, e in enumerate(["car-1", "car-2", "car-1", "car-3", "car-1",
                                                                      "car-3"])]
    # WHEN it is split as the stateful router puts it
    rounds = put_rounds(batch)
    # THEN each round holds at most one event per entity, each entity's events in order (three PutRecords calls)
    assert [[e.data.decode() for e in r] for r in rounds] == [["0", "1", "3"], ["2", "5"], ["4"]]
