"""local/run.py: a SIGTERM or SIGINT stops the run even while the main thread waits inside a boto3 call."""

from __future__ import annotations

import os
import signal
import socket
import threading

import boto3
import pytest
from botocore.config import Config

from local.run import Interrupted, _raise_interrupted


def test_a_sigterm_during_a_boto3_call_is_not_retried_away() -> None:
    # GIVEN a server that accepts connections and never answers, a boto3 client with retries, and the run's handler
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = boto3.client("dynamodb", endpoint_url=f"http://127.0.0.1:{server.getsockname()[1]}", region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x",
                          config=Config(read_timeout=5, connect_timeout=5, retries={"max_attempts": 3}))
    old = signal.signal(signal.SIGTERM, _raise_interrupted)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    try:
        timer.start()
        # WHEN the SIGTERM arrives while the main thread waits for the answer
        # THEN the call ends with Interrupted (botocore catches Exception around a request and would retry it)
        with pytest.raises(Interrupted, match="SIGTERM"):
            client.list_tables()
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, old)
        server.close()
    # AND it is not an Exception, so no `except Exception` on the way swallows it
    assert not issubclass(Interrupted, Exception)
