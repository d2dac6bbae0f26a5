"""Execution environments of a Lambda handler in the local loop (local.loops.lambda_environments); the event source
mapping that invokes them per shard is tested in test_event_source.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from local.loops import lambda_environments

HANDLER = '''
import functools

@functools.cache
def runtime():
    return {"invocations": 0}

def handler(event, context):
    runtime()["invocations"] += 1
    return runtime()["invocations"]
'''


def test_each_environment_has_its_own_module_globals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a handler module that counts invocations in a cached global (as the router caches its ledgers)
    (tmp_path / "envs_probe_handler.py").write_text(HANDLER)
    monkeypatch.syspath_prepend(str(tmp_path))
    # WHEN three environments are made and invoked 2, 1 and 0 times
    envs = lambda_environments("envs_probe_handler:handler", 3)
    got: list[Any] = [envs[0].handler({}, None), envs[0].handler({}, None), envs[1].handler({}, None)]
    # THEN each counted only its own invocations: the copies share no globals with the imported module
    assert got == [1, 2, 1]
    assert envs[2].module.runtime() == {"invocations": 0}
    assert [e.name for e in envs] == [f"envs_probe_handler@env{i}" for i in range(3)]
    assert sys.modules["envs_probe_handler@env1"] is envs[1].module
    assert envs[0].module is sys.modules["envs_probe_handler"]
