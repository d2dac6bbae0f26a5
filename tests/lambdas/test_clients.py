"""lambdas.runtime.clients: every AWS call a function makes ends, retries included, before the function does."""

from __future__ import annotations

import pytest

from infra.deploy import DEPLOYER_TIMEOUT, HOOKS_TIMEOUT
from infra.partitioner_fn import PARTITIONER_TIMEOUT
from infra.router import ROUTER_TIMEOUT
from lambdas.router.handler import put_client
from lambdas.runtime.clients import (
    MAX_READ_TIMEOUT_S,
    REPORT_MARGIN_S,
    TOTAL_ATTEMPTS,
    ClientLimits,
    client_limits,
    make_clients,
)
from lambdas.runtime.config import ConfigError, LambdaConfig

# never called; keeps these clients apart from the moto-backed ones other tests get from make_clients' cache
ENDPOINT = "http://127.0.0.1:9"
TIMEOUTS = {"router": ROUTER_TIMEOUT, "hooks": HOOKS_TIMEOUT, "deployer": DEPLOYER_TIMEOUT,
            "partitioner": PARTITIONER_TIMEOUT}  # fmt: skip


def test_the_worst_case_counts_every_attempts_timeouts_and_the_longest_backoffs() -> None:
    # GIVEN 3 attempts of 2 s connect + 10 s read
    limits = ClientLimits(connect_timeout_s=2.0, read_timeout_s=10.0, total_attempts=3)
    # THEN 3 x 12 s, plus before retry 1 and 2 the longest sleep (1 s and 2 s) and an x-amz-retry-after's 5 s each
    assert limits.worst_case_s() == 36.0 + (1 + 5) + (2 + 5)
    # AND one attempt has no backoff
    assert ClientLimits(2.0, 10.0, 1).worst_case_s() == 12.0


def test_the_former_fixed_limits_outlast_a_one_minute_function() -> None:
    # GIVEN the limits every function had (connect 5 s, read 30 s, max_attempts 5 = 6 calls)
    former = ClientLimits(connect_timeout_s=5.0, read_timeout_s=30.0, total_attempts=6)
    # THEN one call could take longer than the router's and the hooks' whole minute
    assert former.worst_case_s() > ROUTER_TIMEOUT.to_seconds()


@pytest.mark.parametrize("name", sorted(TIMEOUTS))
def test_each_functions_clients_fit_its_timeout(name: str) -> None:
    # GIVEN a function's timeout, as the stack passes it (FUNCTION_TIMEOUT_S)
    timeout = TIMEOUTS[name].to_seconds()
    cfg = LambdaConfig.from_env({"FUNCTION_TIMEOUT_S": str(int(timeout)), "AWS_REGION": "us-east-1",
                                 "AWS_ENDPOINT_URL": ENDPOINT})
    # WHEN its clients are made
    clients = make_clients(cfg)
    # THEN they carry the limits derived from it, and one call's worst case leaves the reporting margin
    limits = client_limits(timeout)
    for client in (clients.s3, clients.dynamodb, clients.kinesis, clients.ecs):
        config = client.meta.config
        assert (config.connect_timeout, config.read_timeout) == (limits.connect_timeout_s, limits.read_timeout_s)
        assert config.retries == {"total_max_attempts": TOTAL_ATTEMPTS, "mode": "standard"}
    assert limits.worst_case_s() + REPORT_MARGIN_S <= timeout
    assert 3.0 <= limits.read_timeout_s <= MAX_READ_TIMEOUT_S


def test_the_routers_put_client_tries_once_within_the_routers_timeout() -> None:
    # GIVEN the router's configuration WHEN its put client is made
    cfg = LambdaConfig.from_env({"FUNCTION_TIMEOUT_S": str(int(ROUTER_TIMEOUT.to_seconds())), "AWS_REGION": "us-east-1"})
    config = put_client(cfg).meta.config
    # THEN one attempt, whose timeouts end before the function's
    assert config.retries == {"total_max_attempts": 1, "mode": "standard"}
    assert config.connect_timeout + config.read_timeout + REPORT_MARGIN_S <= ROUTER_TIMEOUT.to_seconds()


def test_a_timeout_too_short_for_its_calls_is_refused_naming_it() -> None:
    # GIVEN a 20 s function WHEN limits are derived THEN ConfigError names the timeout
    with pytest.raises(ConfigError, match=r"20\.0"):
        client_limits(20.0)


def test_a_malformed_function_timeout_is_refused_naming_the_value() -> None:
    # GIVEN FUNCTION_TIMEOUT_S=soon WHEN the config is read THEN ConfigError names the variable and value
    with pytest.raises(ConfigError, match=r"FUNCTION_TIMEOUT_S.*'soon'"):
        LambdaConfig.from_env({"FUNCTION_TIMEOUT_S": "soon"})
