"""The surge signal record: its key, its JSON round trip, and errors naming the bad value."""

from __future__ import annotations

import pytest

from geokernel.contracts.errors import ContractError
from geokernel.contracts.surge import SurgeCell, SurgeSignal, parse_signal_key, signal_key


def signal() -> SurgeSignal:
    return SurgeSignal(7, "w0003", 1000.0, 300.0, 150.0, 2500.0, 2100.0, 2300.0, 2700.0,
                       (SurgeCell("0231", 10.0, 300.0, 1.5),), (("w0003", 2300.0), ("w0004", 1200.0)))


def test_signal_round_trips_and_names_its_key():
    # GIVEN a signal
    s = signal()
    # WHEN written and read back
    back = SurgeSignal.from_bytes(s.to_bytes())
    # THEN it is the same, stored under its version, worker and leading cell
    assert back == s
    assert s.key == "control/surge/v00000007/w0003-0231.json" == signal_key(7, "w0003", "0231")
    assert parse_signal_key(s.key) == (7, "w0003", "0231")
    assert parse_signal_key("control/surges.json") is None


def test_bad_values_are_named():
    # GIVEN records with one bad value each
    # WHEN they are made or read
    # THEN the error names the field and the value
    with pytest.raises(ContractError, match="slope must be a finite number >= 0, got -1"):
        SurgeCell("0231", 1.0, 2.0, -1.0)
    with pytest.raises(ContractError, match="quadkey must be a non-empty quadkey, got '024'"):
        SurgeCell("024", 1.0, 2.0, 1.0)
    with pytest.raises(ContractError, match="names no cell"):
        SurgeSignal(7, "w1", 0.0, 300.0, 1.0, 1.0, 1.0, 1.0, 1.0, ())
    with pytest.raises(ContractError, match="'at' must be a finite number >= 0, got 'x'"):
        SurgeSignal.from_bytes(signal().to_bytes().replace(b'"at":1000.0', b'"at":"x"'))
    with pytest.raises(ContractError, match=r"not a geo-rebalancer\.surge-signal/1 object"):
        SurgeSignal.from_bytes(b"{}")
