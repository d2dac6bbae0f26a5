"""local.fault_names: the ``--faults`` names, ``all`` per swap mode, and a bad name naming itself (exit 2)."""

from __future__ import annotations

import pytest

from local.config import parse_args
from local.fault_names import FAULTS, WHOLE_ONLY, FaultError, parse_faults


def test_a_hook_fault_in_carry_mode_is_a_bad_argument_naming_the_mode() -> None:
    # GIVEN carry mode, where no swap is an ECS deployment WHEN a hook fault is asked for THEN exit-2 error naming it
    with pytest.raises(FaultError, match=r"hook-timeout needs --swap-mode whole \(got 'carry'\)"):
        parse_args(["--faults", "hook-timeout"])


def test_parse_faults_takes_all_a_list_or_nothing_and_names_a_bad_one() -> None:
    assert parse_faults("all", "whole") == FAULTS
    assert parse_faults("all") == tuple(f for f in FAULTS if f not in WHOLE_ONLY)
    assert parse_faults("worker-kill, worker-kill") == ("worker-kill",)
    assert parse_faults("spark-kill,worker-kill") == ("spark-kill", "worker-kill")
    assert parse_faults("") == ()
    with pytest.raises(FaultError, match="'spark-kil'"):
        parse_faults("worker-kill,spark-kil")
    # AND the command line takes it (a bad name is a ValueError: the loop exits 2)
    assert parse_args(["--quick", "--faults", "all"]).faults == tuple(f for f in FAULTS if f not in WHOLE_ONLY)
    assert parse_args(["--quick", "--swap-mode", "whole", "--faults", "all"]).faults == FAULTS
    with pytest.raises(ValueError, match="'nope'"):
        parse_args(["--faults", "nope"])
