"""The worker's JSON codec gives the standard library's values and text (geo_service.pipeline.codec)."""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geo_service.pipeline.codec import dumps_row, dumps_state, loads, plain, value_of

#: Floats of every size (the spellings json and orjson differ on: 1e-05, 1e-07, 1e+16) and NaN, infinity.
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [1e-05, 4.58e-06, 1e-07, 2e-10, 1e-4, 1e16, 1e22, 2.0**63, -0.0, 0.0, 1.7976931348623157e308])
#: Integers inside and beyond 64 bits.
INTS = st.integers(min_value=-2**70, max_value=2**70) | st.sampled_from([2**63, 2**64, -2**63 - 1])
#: Text with control characters, DEL, non-ASCII, astral characters, backslashes and lone surrogates.
TEXT = st.text(st.characters(codec=None), max_size=8) | st.sampled_from(["\x7f", "\\x41", "\ud800", "Hôtel", "😀"])
JSON = st.recursive(st.none() | st.booleans() | INTS | FLOATS | TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12)


def _json_row(row: Any) -> str:
    return json.dumps(row, separators=(",", ":"), default=str)


@given(st.dictionaries(TEXT, JSON, max_size=6))
def test_a_row_is_written_as_json_writes_it(row: dict[str, Any]) -> None:
    # GIVEN any row of JSON values (and the floats, integers and characters where the two libraries differ)
    # WHEN the worker's codec writes it, trusting plain() to say whether orjson may
    # THEN the text is json.dumps's, byte for byte
    assert dumps_row(row, plain(row)) == _json_row(row)


@given(JSON)
def test_a_record_reads_as_json_reads_it(value: Any) -> None:
    # GIVEN a record as producers write it (json's text, ASCII-escaped or not)
    for raw in (json.dumps(value).encode(), json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")):
        try:
            want = json.loads(raw)
        except ValueError:  # a lone surrogate in UTF-8: neither reads it
            continue
        # WHEN the worker's codec reads it
        got, is_plain = loads(raw)
        # THEN it is json.loads's value (the same text again, NaN included), and a plain value writes as json does
        assert json.dumps(got) == json.dumps(want) and json.dumps(value_of(raw)) == json.dumps(want)
        if is_plain:
            assert dumps_row({"v": got}, True) == _json_row({"v": want})


@given(JSON)
def test_a_state_is_written_as_json_writes_it_or_refused_as_json_refuses_it(value: Any) -> None:
    # GIVEN any value a stateful transform may return as an entity's state
    try:
        want: tuple[str, Any] = ("text", json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        want = ("refused", type(exc))
    # WHEN the worker's codec writes it
    try:
        got: tuple[str, Any] = ("text", dumps_state(value))
    except (TypeError, ValueError) as exc:
        got = ("refused", type(exc))
    # THEN it is json's text, or refused with json's exception
    assert got == want


@pytest.mark.parametrize("value", [(1, 2), {1: "a"}, {"e": uuid.UUID(int=1)}, {"n": math.nan}, {"s": {1, 2}},
                                   {"tiny": 1e-5}])
def test_values_orjson_writes_otherwise_are_not_plain_and_reach_json(value: Any) -> None:
    # GIVEN values orjson writes differently from json or json refuses (a tuple, an int key, a UUID, NaN, a set, a
    # float json spells 1e-05; an integer beyond 64 bits is plain: orjson refuses it and json writes it)
    # WHEN the codec writes them as a row and as a state
    # THEN none is plain, the row is json's text and the state json's text or json's refusal
    assert not plain(value)
    assert dumps_row({"v": value}, plain({"v": value})) == _json_row({"v": value})
    try:
        want: object = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        want = type(exc)
    try:
        got: object = dumps_state(value)
    except (TypeError, ValueError) as exc:
        got = type(exc)
    assert got == want
