"""geokernel.contracts.env: every environment variable name once, each documented with its setters and readers."""

from __future__ import annotations

import os

import pytest

from geokernel.contracts.env import ENV_VARS, Component, EnvVar

# Variables no part of the system sets: the reader's default applies unless an operator sets them.
DEFAULT_ONLY = {EnvVar.BUFFER_RING, EnvVar.OUTPUT_FLUSH_BYTES, EnvVar.GET_RECORDS_INTERVAL_S}


def test_every_name_is_its_own_value_and_a_plain_string_key() -> None:
    # GIVEN every member
    for var in EnvVar:
        # THEN its name is the variable's name, and it is the same key as the plain string
        assert var.name == var.value == str(var) == f"{var}"
        assert {var.value: 1}[var] == 1 and {var: 1}[var.value] == 1


def test_os_environ_reads_and_writes_through_a_member(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a variable set under a member
    monkeypatch.setenv(EnvVar.INGEST_STREAM, "s")
    # THEN the plain name and the member read it
    assert os.environ["INGEST_STREAM"] == "s" and os.environ.get(EnvVar.INGEST_STREAM) == "s"


def test_every_variable_is_documented_with_its_setters_readers_and_meaning() -> None:
    # GIVEN the documentation table
    # THEN it covers every member, each with a meaning, and a setter unless only the default applies
    assert set(ENV_VARS) == set(EnvVar)
    for var, use in ENV_VARS.items():
        assert use.meaning.strip(), var
        assert bool(use.set_by) == (var not in DEFAULT_ONLY), var
        assert all(isinstance(c, Component) for c in (*use.set_by, *use.read_by)), var


def test_only_the_local_loops_informational_variable_has_no_reader() -> None:
    # GIVEN the variables nobody reads
    unread = {var for var, use in ENV_VARS.items() if not use.read_by}
    # THEN only INGEST_STREAM (set by the local loop for a process that wants the stream's name)
    assert unread == {EnvVar.INGEST_STREAM}
