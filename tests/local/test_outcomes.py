"""local.outcomes: what the partitioner handler answered, as the run's lines and the report read it."""

from __future__ import annotations

from local.outcomes import outcome, summarise


def test_outcome_reads_the_first_manifests_status_reason_and_version() -> None:
    # GIVEN the handler's answers for a published spec, a held one and a rejected snapshot
    published = {"results": [{"status": "published", "reason": "", "version": 4}]}
    held = {"results": [{"status": "held", "reason": "policy: below the high watermark"}]}
    rejected = {"results": [{"status": "rejected", "reason": "bad_row: k line 2", "version": "x"}]}
    # WHEN read THEN status, reason and version come back (a version that is not an int is none)
    assert outcome(published) == ("published", "", 4)
    assert outcome(held) == ("held", "policy: below the high watermark", None)
    assert outcome(rejected) == ("rejected", "bad_row: k line 2", None)
    # AND an answer of another shape is unknown, its text kept as the reason
    assert outcome({"errorMessage": "boom"}) == ("unknown", '{"errorMessage": "boom"}', None)
    assert outcome({"results": []})[0] == "unknown"


def test_summarise_gives_one_line_per_answer() -> None:
    # GIVEN answers for two manifests, none, and an answer of another shape WHEN summarised THEN one line each
    two = {"results": [{"status": "published", "version": 2}, {"status": "held", "reason": "cooldown"}]}
    assert summarise(two) == "published v2; held: cooldown"
    assert summarise({"results": []}) == "no manifest in the event"
    assert summarise({"x": 1}) == '{"x": 1}'
