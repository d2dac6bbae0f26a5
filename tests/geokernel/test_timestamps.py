"""geokernel.timestamps: the time unit rule on one value (the shared cases: tests/events/ts_units.json)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.contracts.timestamps import AUTO_UNIT_BELOW, TS_WINDOW, TsUnit, auto_unit
from geokernel.timestamps import EventTime, encode_ts, event_time_ms, instant_text, now_ms, read_ts

NOW = 1_796_601_600_000  # 2026-12-07T00:00:00Z


@pytest.mark.parametrize(("number", "unit"), [
    (9.5e8, TsUnit.S), (99_999_999_999, TsUnit.S), (1e11, TsUnit.MS), (99_999_999_999_999, TsUnit.MS),
    (1e14, TsUnit.US), (1.7e18, TsUnit.US), (-5, TsUnit.S),
])
def test_auto_reads_a_number_in_the_unit_of_its_magnitude(number: float, unit: TsUnit) -> None:
    # GIVEN a number around auto's bounds WHEN classified THEN below 1e11 is s, below 1e14 ms, the rest us
    assert auto_unit(number) is unit
    assert [b for b, _ in AUTO_UNIT_BELOW] == [1e11, 1e14]


def test_the_window_is_one_constant_and_names_itself() -> None:
    # GIVEN the plausible window THEN it starts at 2000-01-01, ends a day after now, and reasons name it so
    assert TS_WINDOW.earliest_ms == 946_684_800_000 and TS_WINDOW.latest_ms(NOW) == NOW + 86_400_000
    assert TS_WINDOW.text == "[2000-01-01, now + 1 day]"


@pytest.mark.parametrize(("value", "unit", "ms"), [
    (1733574037.123, TsUnit.S, 1733574037123),  # the double product is 1733574037122.9998: rounding, not floor
    (1733574037.0005, TsUnit.S, 1733574037001),  # a half millisecond rounds up
    (1733574037123.49, TsUnit.MS, 1733574037123),
    ("  1733574037123  ", TsUnit.AUTO, 1733574037123),  # spaces around a number in text
    ("1.733574037123e12", TsUnit.MS, 1733574037123),  # exponent text, as Spark reads it
    ("2024-12-07T12:20:37.1234995Z", TsUnit.ISO, 1733574037123),  # below the microsecond dropped, then rounded
    ("2024-12-07T12:20:37.1235Z", TsUnit.AUTO, 1733574037124),
    ("2024-12-07 12:20:37", TsUnit.AUTO, 1733574037000),  # no zone: UTC
])
def test_every_time_is_rounded_to_the_nearest_millisecond(value: object, unit: TsUnit, ms: int) -> None:
    # GIVEN a time with more precision than milliseconds WHEN read THEN the nearest millisecond, halves up
    assert read_ts(value, "ts", unit, NOW) == EventTime(ms)


def test_a_typed_instant_is_accepted_under_every_unit_and_a_date_is_its_midnight() -> None:
    # GIVEN a datetime (a typed timestamp column of a recorded log) WHEN read under each unit THEN it is the instant
    when = datetime(2024, 12, 7, 12, 20, 37, 123000)
    assert {read_ts(when, "t", u, NOW).ms for u in TsUnit} == {1733574037123}
    assert read_ts(when.replace(tzinfo=UTC), "t", TsUnit.MS, NOW).ms == 1733574037123
    old = read_ts(datetime(1999, 1, 1), "t", TsUnit.AUTO, NOW)
    assert old.ms is None and "is 1999-01-01T00:00:00Z, outside the plausible window" in old.reason
    assert read_ts(date(2024, 12, 7), "t", TsUnit.MS, now=NOW).ms == 1733529600000


@pytest.mark.parametrize(("value", "needle"), [
    (float("nan"), "ts nan is not a finite number"),
    (float("inf"), "ts inf read as us (ts_unit 'auto') is after 9999-12-31"),
    (10**400, "read as us (ts_unit 'auto') is after 9999-12-31"),  # beyond a double: no OverflowError
    ("1e999", "ts '1e999' read as us (ts_unit 'auto') is after 9999-12-31"),
    ([1], "ts must be an epoch number or ISO-8601 text, got [1]"),
    (None, "got None"),
    ("2024-02-30T00:00Z", "ts '2024-02-30T00:00Z' is not a valid ISO-8601 date-time"),
    ("x" * 200, "...' is neither an epoch number nor an ISO-8601 date-time"),
])
def test_odd_values_are_bad_timestamps_naming_the_value(value: object, needle: str) -> None:
    # GIVEN a value no unit reads WHEN read THEN a bad_timestamp reason names it (cut when long)
    got = read_ts(value, "ts", TsUnit.AUTO, NOW)
    assert got.ms is None and got.reason.startswith("bad_timestamp: ts ") and needle in got.reason
    assert len(got.reason) < 300


def test_the_clock_defaults_to_now() -> None:
    # GIVEN no clock WHEN a time of an hour ago and one of two days ahead are read THEN the first only is plausible
    now = now_ms()
    assert read_ts(now - 3_600_000).ms == now - 3_600_000
    assert read_ts(now + 2 * 86_400_000).ms is None


def test_an_instant_is_named_to_the_second_or_past_the_years_an_iso_time_can_name() -> None:
    # GIVEN times in ms plus the rounding half WHEN named THEN ISO to the second, or before 1970 / after 9999
    assert instant_text(1733574037123.5) == "2024-12-07T12:20:37Z"
    assert instant_text(-0.5) == "before 1970-01-01" and instant_text(1e300) == "after 9999-12-31"


@settings(max_examples=200, deadline=None)
@given(st.integers(946_684_800_000, NOW + 86_400_000), st.sampled_from(list(TsUnit)))
def test_what_a_producer_writes_in_a_unit_reads_back_to_its_millisecond(ms: int, unit: TsUnit) -> None:
    # GIVEN any plausible millisecond written as a producer with that ts_unit writes it (the local replay's stamp)
    # WHEN read under the unit THEN it is the same millisecond (seconds with a fraction included)
    assert read_ts(encode_ts(ms, unit), "ts", unit, NOW) == EventTime(ms)


@pytest.mark.parametrize(("fields", "ms"), [
    ({"ts_ms": 1_795_255_501_000, "ts": "ignored"}, 1_795_255_501_000),  # the worker's reading wins
    ({"ts": "2026-11-21T10:05:01Z"}, 1_795_255_501_000), ({"ts": "2026-11-21T10:05:01.5+01:00"}, 1_795_251_901_500),
    ({"ts": 1795255500000.5}, 1_795_255_500_001), ({"ts": 1_795_255_500}, 1_795_255_500_000),  # seconds, by auto
])
def test_an_events_time_is_its_ts_ms_else_its_ts_by_the_rule(fields: dict[str, object], ms: int) -> None:
    # GIVEN an enriched record (with ts_ms) or a raw event (ts only) WHEN its time is read THEN the epoch ms
    assert event_time_ms(fields) == ms


def test_an_event_without_a_readable_time_is_named() -> None:
    # GIVEN no ts_ms and a ts the rule refuses WHEN its time is read THEN the error names the value
    with pytest.raises(ValueError, match="'yesterday'"):
        event_time_ms({"ts": "yesterday"})
