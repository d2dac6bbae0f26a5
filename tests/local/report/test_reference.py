"""The report's ORACLE section and invariant (local.report.reference)."""

from __future__ import annotations

from local.oracle import Difference, OracleResult
from local.report.reference import check, section, to_json


def _result(differing: int, stateful: bool) -> OracleResult:
    examples = (Difference("e7", "car-1", "speed_mps", 1.5, None),) if differing else ()
    return OracleResult("transforms.geofence_state:GeofenceState", stateful, 100, 0, 0, differing, 0, 0, 0, examples,
                        0.4)


def test_a_clean_oracle_passes_with_its_summary_line() -> None:
    # GIVEN an oracle result without differences WHEN judged THEN the invariant holds and carries the line
    name, ok, detail = check(_result(0, False), None)
    assert ok and detail.startswith("ORACLE OK") and "100 events compared" in detail and "oracle" in name


def test_a_stateful_difference_fails_and_the_section_says_why() -> None:
    # GIVEN a stateful transform's result with one difference
    result = _result(1, True)
    # WHEN the section and the invariant are built
    lines = section(result, None)
    _name, ok, _detail = check(result, None)
    # THEN the run fails, the example is listed and the section points at the state handoff
    assert not ok and any("'e7'" in line and "'speed_mps'" in line for line in lines)
    assert any("state was not handed over in order" in line and "geo_service/entity/handoff.py" in line for line in lines)
    assert to_json(result, None)["examples"][0]["event_id"] == "e7" and to_json(result, None)["ok"] is False


def test_a_reference_run_that_failed_fails_the_invariant() -> None:
    # GIVEN no result, an error WHEN judged THEN the invariant fails naming the error
    _name, ok, detail = check(None, "TransformError: boom")
    assert not ok and "boom" in detail and section(None, "boom")[1].endswith("boom") and to_json(None, "boom") == {
        "error": "boom"}
