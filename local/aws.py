"""The embedded AWS: a moto server on 127.0.0.1 and the resources the loop needs.

:func:`start_moto` starts a :class:`SerialMotoServer` on a free port and returns an
:class:`EmbeddedAws` that knows the endpoint and the resource names.
:meth:`EmbeddedAws.environment` is the environment every component gets (the same
variable names as in AWS, ``lambdas/runtime/config.py``; ``AWS_ENDPOINT_URL`` points at
moto, credentials are dummies), and :meth:`EmbeddedAws.create_resources` creates the
ingest stream, the buckets and the DynamoDB tables with the names of
``docs/CONTRACTS.md`` under the prefix (default ``georebal-local``), and for a transform whose transitions the workers
push, the geofence bus with a rule to a log group.

Notes
-----
The server runs in a daemon thread of the calling process, so it dies with it; other
processes (Spark, workers) reach it over HTTP like any AWS endpoint. It runs one request
at a time (see :class:`SerialMotoServer`).
"""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from geokernel.contracts.env import EnvVar
from geokernel.contracts.lease import LEASE_KEY_ATTR
from geokernel.contracts.stream import StreamStatus, geo_stream_name
from local.kinesis_faults import KinesisThrottle

if TYPE_CHECKING:
    from local.iam.gate import IamGate

REGION = "us-east-1"
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                     "AWS_SESSION_TOKEN": "testing"}


@dataclass(frozen=True)
class Names:
    """Resource names derived from one prefix (CONTRACTS: "AWS names and records")."""

    prefix: str

    @property
    def ingest_stream(self) -> str:
        return f"{self.prefix}-ingest"

    @property
    def snapshots_bucket(self) -> str:
        return f"{self.prefix}-snapshots"

    @property
    def specs_bucket(self) -> str:
        return f"{self.prefix}-specs"

    @property
    def costs_bucket(self) -> str:
        return f"{self.prefix}-costs"

    @property
    def quarantine_bucket(self) -> str:
        return f"{self.prefix}-quarantine"

    @property
    def output_bucket(self) -> str:
        return f"{self.prefix}-output"

    @property
    def control_table(self) -> str:
        return f"{self.prefix}-control"

    @property
    def leases_table(self) -> str:
        return f"{self.prefix}-leases"

    @property
    def router_failures_queue(self) -> str:
        """The router's on-failure destination (the stack names it so: ``infra/router.py``)."""
        return f"{self.prefix}-router-failures"

    @property
    def geofence_bus(self) -> str:
        """The EventBridge bus the workers put geofence transitions on (``GEOFENCE_EVENT_BUS``), when the transform
        makes them (:func:`local.environment.geofence_events`)."""
        return f"{self.prefix}-geofence-events"

    @property
    def geofence_log_group(self) -> str:
        """The CloudWatch Logs group a rule on :attr:`geofence_bus` sends every geofence event to (the report reads it
        back); under ``/aws/events/``, where the EventBridge console lists a rule's log groups."""
        return f"/aws/events/{self.prefix}-geofence-events"

    @property
    def geo_stream_key(self) -> str:
        """KMS alias of the geo streams' key (the deployer turns their encryption on with it)."""
        return f"alias/{self.prefix}-geo-streams"

    def geo_stream(self, version: int) -> str:
        """Return the geo stream of one spec version: ``<prefix>-geo-v<version>``."""
        return geo_stream_name(self.prefix, version)

    @property
    def buckets(self) -> tuple[str, ...]:
        return (self.snapshots_bucket, self.specs_bucket, self.costs_bucket, self.quarantine_bucket,
                self.output_bucket)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SerialMotoServer:
    """A moto server on ``host`` that accepts connections in threads but runs one request at a time.

    moto's backends take no locks. Two concurrent conditional writes to one DynamoDB item can
    both pass their condition, and a GetRecords racing a PutRecords on one shard can fail with
    "OrderedDict mutated during iteration". Real AWS is atomic per item and per shard; running
    requests one at a time gives the emulator that atomicity (the lease protocol relies on it),
    while the clients stay real concurrent threads and processes talking HTTP.

    Parameters
    ----------
    host : str
    port : int
        0 picks a free port; :attr:`url` has the one bound.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        from local import moto_events, moto_kinesis

        #: None, or why moto's own Kinesis reads were kept (local/moto_kinesis.py: a moto it does not know)
        self.kinesis_note = moto_kinesis.install()  # a shard's put and read in constant time
        #: None, or why moto's EventBridge targets still compile their paths per event (local/moto_events.py)
        self.events_note = moto_events.install()
        app = DomainDispatcherApplication(create_backend_app)
        lock = threading.Lock()
        self.throttle = KinesisThrottle()  # the stream-throttle and put-partial faults (local.kinesis_faults)
        #: The twin's IAM gate (local.iam.gate), set once the parts' principals exist; None: no IAM checks
        self.gate: IamGate | None = None

        def serialised(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            with lock:  # the whole body is produced inside the lock
                refused = self.throttle.refuse(environ)
                if refused is not None:
                    start_response("400 Bad Request", [("Content-Type", "application/x-amz-json-1.1"),
                                                       ("Content-Length", str(len(refused)))])
                    return [refused]
                gate = self.gate

                def inner(env: dict[str, Any], respond: Callable[..., Any]) -> list[bytes]:
                    return list(app(env, respond)) if gate is None else _gated(gate, app, env, respond)

                if self.throttle.splits(environ):
                    return self.throttle.put_partly(environ, inner, start_response,
                                                    None if gate is None else gate.resign)
                return inner(environ, start_response)

        self._server = make_server(host, port, serialised, threaded=True, request_handler=MotoRequestHandler)
        self.url = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto", daemon=True)

    def start(self) -> SerialMotoServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)


def _gated(gate: IamGate, app: Any, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    """Run a request through the IAM gate, then moto; record a refusal by moto's own access control."""
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    environ["wsgi.input"] = io.BytesIO(body)  # moto reads it again
    denied = gate.check(environ, body)
    if denied is not None:
        status, headers, answer = denied
        start_response(status, headers)
        return [answer]
    seen: list[str] = []

    def note(status: str, headers: Any, exc_info: Any = None) -> Any:
        seen.append(status)
        return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

    chunks = list(app(environ, note))
    gate.observe(environ, seen[0] if seen else "", chunks)
    return chunks


@dataclass(frozen=True)
class EmbeddedAws:
    """A running moto server plus the names of the resources created in it."""

    endpoint_url: str
    names: Names
    server: SerialMotoServer
    #: The harness's keys (the replay, the observer, the report): dummies until the twin's IAM is set up
    #: (local.iam.principals), then the harness user's
    harness_keys: tuple[str, str] = ("testing", "testing")
    _session: boto3.session.Session = field(default_factory=boto3.session.Session, repr=False, compare=False)

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Return the environment variables every component of the loop gets."""
        env = {
            **DUMMY_CREDENTIALS,
            EnvVar.AWS_DEFAULT_REGION: REGION,
            EnvVar.AWS_REGION: REGION,
            EnvVar.AWS_ENDPOINT_URL: self.endpoint_url,
            EnvVar.GEO_PREFIX: self.names.prefix,
            EnvVar.CONTROL_TABLE: self.names.control_table,
            EnvVar.LEASES_TABLE: self.names.leases_table,
            EnvVar.SNAPSHOTS_BUCKET: self.names.snapshots_bucket,
            EnvVar.SPECS_BUCKET: self.names.specs_bucket,
            EnvVar.COSTS_BUCKET: self.names.costs_bucket,
            EnvVar.QUARANTINE_BUCKET: self.names.quarantine_bucket,
            EnvVar.OUTPUT_BUCKET: self.names.output_bucket,
            EnvVar.INGEST_STREAM: self.names.ingest_stream,
            EnvVar.GEO_STREAM_KMS_KEY: self.names.geo_stream_key,
        }
        env.update(extra or {})
        return env

    def resource(self, service: str) -> Any:
        """Return a boto3 resource for ``service`` bound to the moto endpoint (the harness's session)."""
        key, secret = self.harness_keys
        return self._session.resource(service, endpoint_url=self.endpoint_url, region_name=REGION,
                                      aws_access_key_id=key, aws_secret_access_key=secret)

    def client(self, service: str) -> Any:
        """Return a boto3 client for ``service`` bound to the moto endpoint."""
        # the harness's session: its calls (observer, replayer, report) are not the system's (local.calls)
        key, secret = self.harness_keys
        return self._session.client(service, endpoint_url=self.endpoint_url, region_name=REGION,
                            aws_access_key_id=key, aws_secret_access_key=secret,
                            config=Config(retries={"max_attempts": 5, "mode": "standard"},
                                          max_pool_connections=20))

    def create_resources(self, ingest_shards: int, geofence_events: bool = False) -> None:
        """Create the ingest stream, the buckets and the control and leases tables.

        Parameters
        ----------
        ingest_shards
            Shard count of the ingest stream (>= 1).
        geofence_events
            Also the geofence bus, and a rule sending its geofence events to a log group (:meth:`create_geofence_bus`).
        """
        if ingest_shards < 1:
            raise ValueError(f"ingest_shards must be >= 1, got {ingest_shards!r}")
        s3 = self.client("s3")
        for bucket in self.names.buckets:
            s3.create_bucket(Bucket=bucket)
        ddb = self.client("dynamodb")
        ddb.create_table(TableName=self.names.control_table, BillingMode="PAY_PER_REQUEST",
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
        ddb.create_table(TableName=self.names.leases_table, BillingMode="PAY_PER_REQUEST",
                         KeySchema=[{"AttributeName": LEASE_KEY_ATTR, "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": LEASE_KEY_ATTR, "AttributeType": "S"}])
        kms = self.client("kms")
        key_id = kms.create_key(Description=f"{self.names.prefix}: per-version geo streams")["KeyMetadata"]["KeyId"]
        kms.create_alias(AliasName=self.names.geo_stream_key, TargetKeyId=key_id)
        kinesis = self.client("kinesis")
        kinesis.create_stream(StreamName=self.names.ingest_stream, ShardCount=ingest_shards)
        wait_stream_active(kinesis, self.names.ingest_stream)
        self.client("sqs").create_queue(QueueName=self.names.router_failures_queue)
        if geofence_events:
            self.create_geofence_bus()

    def create_geofence_bus(self) -> str:
        """Create the geofence bus and a rule sending our geofence events (source and detail-type of
        :mod:`geo_service.pipeline.geofence_events`) to a CloudWatch Logs group; return the group's name.

        Notes
        -----
        The group's resource policy lets EventBridge create streams and put events in it, as AWS requires of a Logs
        target (EventBridge uses no role for it: https://docs.aws.amazon.com/eventbridge/latest/userguide/
        eb-use-resource-based.html#eb-cloudwatchlogs-permissions). The target is a log group rather than a queue
        because moto's SQS counts every message of a queue on each send and receive (``Queue.attributes``): at a
        loop's volume (thousands of transitions) its deliveries slowed until moto stopped answering, while a log
        group's put is constant-time and :func:`local.report.eventbridge.read_received` reads it once at the end.
        """
        from geo_service.pipeline.geofence_events import DETAIL_TYPE, SOURCE

        events, logs, names = self.client("events"), self.client("logs"), self.names
        events.create_event_bus(Name=names.geofence_bus)
        rule = events.put_rule(Name=names.geofence_bus, EventBusName=names.geofence_bus,
                               EventPattern=json.dumps({"source": [SOURCE], "detail-type": [DETAIL_TYPE]}))["RuleArn"]
        group = names.geofence_log_group
        logs.create_log_group(logGroupName=group)
        arn = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"][0]["logGroupArn"]
        policy = {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": f"{arn}:*",
            "Condition": {"ArnEquals": {"aws:SourceArn": rule}}}]}
        logs.put_resource_policy(policyName=f"{names.geofence_bus}-rule", policyDocument=json.dumps(policy))
        events.put_targets(Rule=names.geofence_bus, EventBusName=names.geofence_bus, Targets=[{"Id": "log-group",
                                                                                                "Arn": arn}])
        return group


def wait_stream_active(kinesis: Any, stream: str, timeout_s: float = 30.0) -> None:
    """Block until ``stream`` is ACTIVE; raise ``TimeoutError`` naming it otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"]
        if status == StreamStatus.ACTIVE:
            return
        time.sleep(0.2)
    raise TimeoutError(f"kinesis stream {stream!r} not ACTIVE after {timeout_s}s")


def start_moto(prefix: str) -> EmbeddedAws:
    """Start a moto server on 127.0.0.1 (free port) and set this process's AWS environment.

    Parameters
    ----------
    prefix
        Resource name prefix, e.g. ``"georebal-local"`` (lowercase letters, digits, ``-``).

    Returns
    -------
    EmbeddedAws
        The running server; call :func:`stop_moto` when done.
    """
    if not prefix or not all(c.islower() or c.isdigit() or c == "-" for c in prefix):
        raise ValueError(f"prefix must be lowercase letters, digits and '-', got {prefix!r}")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access line per request
    server = SerialMotoServer().start()
    aws = EmbeddedAws(endpoint_url=server.url, names=Names(prefix), server=server)
    os.environ.update(aws.environment())
    return aws


def stop_moto(aws: EmbeddedAws) -> None:
    """Stop the moto server (idempotent enough for a ``finally`` block)."""
    try:
        aws.server.stop()
    except Exception as exc:  # shutting down: report, never mask the real error
        print(f"[local] moto server stop failed: {exc!r}")
