"""infra.context: one context value as a typed setting, the key and the bad value in every error."""

from __future__ import annotations

import pytest

from infra.context import as_bool, as_float, as_int, as_text
from infra.errors import ConfigError


def test_command_line_strings_become_typed_values() -> None:
    # GIVEN values as `-c key=value` gives them (strings) and as cdk.json gives them
    # WHEN read THEN each has its type
    assert as_int("12", "zoom", 1, 30) == 12 and as_int(12.0, "zoom", 1, 30) == 12
    assert as_float("0.5", "fill", 0.0, 1.0, lo_open=True) == 0.5
    assert as_bool("TRUE", "retain_data") is True and as_bool(False, "retain_data") is False
    assert as_text("emr", "engine", lambda v: v in ("emr", "glue"), "emr or glue") == "emr"


@pytest.mark.parametrize(("call", "message"), [
    (lambda: as_int(True, "zoom", 1, 30), "context 'zoom' must be an integer, got True"),
    (lambda: as_int(2.5, "zoom", 1, 30), "context 'zoom' must be an integer, got 2.5"),
    (lambda: as_int("31", "zoom", 1, 30), "context 'zoom' must be in [1, 30], got '31'"),
    (lambda: as_float("nan", "fill", 0.0, 1.0), "context 'fill' must be in [0.0, 1.0], got 'nan'"),
    (lambda: as_float(0.0, "fill", 0.0, 1.0, lo_open=True), "context 'fill' must be in (0.0, 1.0], got 0.0"),
    (lambda: as_bool("yes", "retain_data"), "context 'retain_data' must be true or false, got 'yes'"),
    (lambda: as_text(3, "engine", str.isalpha, "letters"), "context 'engine' must be letters, got 3"),
])
def test_a_bad_value_names_its_key_and_shows_the_value(call: object, message: str) -> None:
    # GIVEN a bad value WHEN read THEN one error names the key and shows the value with repr
    with pytest.raises(ConfigError) as err:
        call()  # type: ignore[operator]
    assert str(err.value) == message
