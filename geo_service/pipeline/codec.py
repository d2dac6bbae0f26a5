"""The worker's JSON codec on its hot path: orjson, with the standard library's answers byte for byte.

The worker decodes every record and encodes every enriched row. ``orjson`` does both several times faster than
``json``, but reads and writes some values differently; here each difference either cannot reach orjson or sends the
value to ``json``, so :func:`loads` returns what ``json.loads`` returns and :func:`dumps_row` the text of
``json.dumps(row, separators=(",", ":"), default=str)`` (the enriched line as the worker always wrote it):

==================================  =========================================  ====================================
value                               ``json``                                   here
==================================  =========================================  ====================================
``NaN``, ``Infinity``, ``1e400``    read (nan, inf)                            orjson refuses it: ``json.loads``
a lone surrogate ``"\\ud800"``      read                                       orjson refuses it: ``json.loads``
an integer beyond 64 bits           an int                                     orjson reads a float: any float of
                                                                               size >= 2**63, ``json.loads``
a UTF-8 BOM, a UTF-16/32 record     read                                       orjson refuses it: ``json.loads``
non-ASCII text                      ``\\u00e9`` (``ensure_ascii``)             escaped the same way after orjson
                                                                               (astral characters: ``json.dumps``)
``\\x7f``                           ``\\u007f``                                ``json.dumps``
a float below 1e-4 (not 0)          ``1e-05``, ``1e-07``                       orjson writes ``0.00001``, ``1e-7``:
                                                                               a row holding one is not
                                                                               :func:`plain`, ``json.dumps``
NaN or infinity in a row            ``NaN``, ``Infinity``                      orjson writes ``null``: not
                                                                               :func:`plain`, ``json.dumps``
an integer beyond 64 bits           its digits                                 orjson refuses it: ``json.dumps``
a backslash escape in a non-ASCII   as ``json``                                ``json.dumps`` (rare; keeps the
line                                                                           escaping above exact)
other types (``default=str``)       ``str(value)``                             only :func:`plain` rows reach orjson
==================================  =========================================  ====================================

``tests/geo_service/serving/test_path_equality.py`` holds records of every row of this table; the worker's output on
them equals the output of the per-event path before issue #60, byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

#: The enriched line's encoder (compact, ``default=str``: what the worker always wrote), made once.
JSON_ROW = json.JSONEncoder(separators=(",", ":"), default=str)
#: orjson reads an integer outside [-2**63, 2**64) as a float, whose size is at least this.
_HUGE = 2.0**63
_FLAT = (str, int, bool, type(None))
#: The smallest size of a float orjson writes as ``json`` does (below it ``json`` writes ``1e-05``, orjson
#: ``0.00001``, or ``1e-07`` against ``1e-7``).
_TINY = 1e-4


def loads(raw: bytes | str) -> tuple[Any, bool]:
    """``json.loads(raw)`` and whether the value is *plain* (:func:`plain`: :func:`dumps_row` may write it with orjson).
    Raises what ``json.loads`` raises."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw), False
    if plain(doc):
        return doc, True
    if _huge(doc):  # maybe an integer orjson read as a float (or a float as large): json reads it
        return json.loads(raw), False
    return doc, False


def value_of(raw: bytes | str) -> Any:
    """``json.loads(raw)`` (:func:`loads` without telling whether the value is plain). Raises what ``json.loads``
    raises."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)
    return json.loads(raw) if _huge(doc) else doc


def _huge(value: Any) -> bool:
    """True when a float of size >= 2**63 is somewhere in ``value`` (a JSON value)."""
    t = type(value)
    if t is float:
        return not -_HUGE < value < _HUGE
    if t is dict:
        value = value.values()
    elif t is not list:
        return False
    for v in value:
        tv = type(v)
        if tv is float:
            if not -_HUGE < v < _HUGE:
                return True
        elif (tv is dict or tv is list) and v and _huge(v):
            return True
    return False


def plain(value: Any) -> bool:
    """True when ``value`` is made only of str keys, str, int, bool, None, lists, dicts and floats that orjson writes
    as ``json`` does: 0 and sizes in [1e-4, 2**63) (no NaN or infinity, no ``1e-05`` that orjson writes ``0.00001``)."""
    t = type(value)
    if t is dict:
        for k in value:
            if type(k) is not str:
                return False
        items: Any = value.values()
    elif t is list:
        items = value
    elif t is float:
        return bool(value == 0.0 or _TINY <= value < _HUGE or -_HUGE < value <= -_TINY)
    else:
        return t in _FLAT
    for v in items:
        tv = type(v)
        if tv is float:
            if not (v == 0.0 or _TINY <= v < _HUGE or -_HUGE < v <= -_TINY):
                return False
        elif tv not in _FLAT and not ((tv is dict or tv is list) and (not v or plain(v))):
            return False
    return True


def dumps_row(row: dict[str, Any], is_plain: bool) -> str:
    """``json.dumps(row, separators=(",", ":"), default=str)``, by orjson when ``is_plain`` says the row holds only
    plain values (:func:`plain`) and its text needs none of the differences in the module docstring."""
    if is_plain:
        try:
            out = orjson.dumps(row)
        except TypeError:  # an integer beyond 64 bits, a lone surrogate
            return JSON_ROW.encode(row)
        if b"\x7f" not in out:
            if out.isascii():  # orjson escapes every other ASCII character as json does
                return out.decode("ascii")
            if b"\\" not in out:  # no escape in the text that the replace below could take for another
                escaped = out.decode("utf-8").encode("ascii", "backslashreplace")
                if b"\\U" not in escaped:  # \xe9 -> \u00e9; \u20ac stays; an astral character: json's surrogate pair
                    return escaped.replace(b"\\x", b"\\u00").decode("ascii")
    return JSON_ROW.encode(row)


#: An entity state's encoder (compact UTF-8 text, no NaN: :mod:`geo_service.entity.store`), made once.
JSON_STATE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps_state(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``: the same text, by orjson when
    ``value`` is :func:`plain` (no NaN or infinity, which orjson writes as ``null``; no tuple, enum, UUID or other
    value ``json`` refuses or writes otherwise); else by ``json`` (raising the TypeError or ValueError it raises)."""
    if plain(value):
        try:
            return orjson.dumps(value).decode("utf-8")
        except TypeError:  # an integer beyond 64 bits, a lone surrogate
            pass
    return JSON_STATE.encode(value)
