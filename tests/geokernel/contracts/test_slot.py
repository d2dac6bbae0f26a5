"""geokernel.contracts.slot: SlotId, the one record and text form of a worker slot of a spec version."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geokernel.contracts.errors import ContractError
from geokernel.contracts.lease import LEASE_KEY_ATTR, LeaseRecord, handover_key
from geokernel.contracts.slot import SlotId


@given(st.integers(min_value=0, max_value=10**9), st.text(min_size=1, max_size=20))
def test_the_text_form_parses_back_to_the_same_slot(version: int, worker: str) -> None:
    # GIVEN any slot WHEN written as text and parsed back THEN it is the same slot
    slot = SlotId(version, worker)
    assert str(slot) == f"v{version}#{worker}"
    assert SlotId.parse(str(slot)) == slot == SlotId.match(str(slot))


@pytest.mark.parametrize("text", ["", "v", "v1", "v1#", "w1#v1", "vx#w1", "v-1#w1", "1#w1", "v١#w1",
                                  "handover#v4", "active"])
def test_text_that_names_no_slot_is_none_to_match_and_an_error_naming_it_to_parse(text: str) -> None:
    # GIVEN text that is not v<version>#<worker_id> WHEN matched or parsed
    # THEN match answers None and parse raises naming the text and where it came from
    assert SlotId.match(text) is None
    with pytest.raises(ContractError, match=f"lease table: not a slot .*{text!r}".replace("(", r"\(")):
        SlotId.parse(text, "lease table")


@pytest.mark.parametrize(("version", "worker"), [(-1, "w1"), (True, "w1"), (1.0, "w1"), (1, ""), (1, None)])
def test_a_bad_version_or_worker_is_refused_naming_it(version: object, worker: object) -> None:
    # GIVEN a bad field WHEN a slot is made THEN ContractError names the value
    with pytest.raises(ContractError, match=repr(version) if worker == "w1" else repr(worker)):
        SlotId(version, worker)  # type: ignore[arg-type]


def test_a_lease_item_decodes_its_key_as_a_slot_and_the_handover_summary_as_none() -> None:
    # GIVEN a lease item and the handover summary's item WHEN decoded THEN the lease knows its slot, the summary none
    lease = LeaseRecord.from_item({LEASE_KEY_ATTR: str(SlotId(3, "w0002#a"))})
    assert (lease.version, lease.worker_id) == (3, "w0002#a")
    summary = LeaseRecord.from_item({LEASE_KEY_ATTR: handover_key(3)})
    assert (summary.version, summary.worker_id) == (None, "handover#v3")
