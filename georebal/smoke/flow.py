"""One smoke run, after the preflight: deploy, send, wait, check, destroy (always, unless ``keep``), summary.

Every AWS call goes through ``aws`` (:class:`georebal.aws.Aws`), every command through ``run``
(:class:`georebal.smoke.tools.Runner`) and every wait through ``clock``, so the whole run is tested against moto
with a recording runner and a fake clock (tests/georebal/test_smoke_flow.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from botocore.exceptions import BotoCoreError, ClientError

from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from georebal.aws import Aws
from georebal.errors import GeorebalError
from georebal.exits import EXIT_FAILED, EXIT_OK
from georebal.smoke import events
from georebal.smoke.checks import Verdict, check_delivery, check_failure_queue, count_access_denied, remove_geo_streams
from georebal.smoke.clock import Clock, took
from georebal.smoke.plan import Outputs, SmokePlan, read_outputs, retained_resources
from georebal.smoke.tools import Runner
from georebal.smoke.waits import OutputScanner, wait_for_active, wait_for_output


def say_out(line: str) -> None:
    print(f"smoke: {line}", flush=True)


@dataclass(frozen=True)
class Limits:
    """How many probes, and how long each wait may last (seconds)."""

    events: int = 1000
    active_s: float = 1800.0  # the stack is up -> v1 active: the Spark job's start, a window, a spec, a fleet
    output_s: float = 900.0  # v1 active -> every probe in the output bucket
    streams_s: float = 300.0  # the geo streams' deletion
    poll_s: float = 15.0


@dataclass
class Smoke:
    """The run; call it for the exit status: 0 when every check passed, 1 otherwise."""

    plan: SmokePlan
    aws: Aws
    run: Runner
    clock: Clock
    limits: Limits = field(default_factory=Limits)
    fields: EventFields = DEFAULT_EVENT_FIELDS
    keep: bool = False
    say: Callable[[str], None] = say_out
    deployed: bool = False
    tick_ids: list[str] = field(default_factory=list)

    def __call__(self) -> int:
        started = self.clock.now()
        verdicts: list[Verdict] = []
        try:
            verdicts += self._deploy_and_check(started)
        except (GeorebalError, ClientError, BotoCoreError) as exc:  # the run stops; the stack still goes
            verdicts.append(Verdict("run", False, f"stopped: {exc}"))
        except KeyboardInterrupt:
            self.say("interrupted: " + ("the stack is kept (--keep)" if self.keep else
                                        "destroying the stack (Ctrl-C again leaves it)"))
            for verdict in self._teardown():
                for line in verdict.lines():
                    self.say(line)
            raise
        verdicts += self._teardown()
        return self._summary(verdicts, self.clock.now() - started)

    def _env(self) -> dict[str, str]:
        return {"AWS_REGION": self.aws.region, "AWS_DEFAULT_REGION": self.aws.region}

    def _deploy_and_check(self, started: float) -> list[Verdict]:
        command = self.plan.deploy_command()
        self.say(f"deploy: {' '.join(command)}")
        self.deployed = True  # even a failed deploy may leave a stack behind: destroy it too
        status = self.run(command, cwd=self.plan.root, env=self._env())
        if status:
            return [Verdict("deploy", False, f"cdk deploy exited {status} (its output above says why)")]
        outputs = read_outputs(self.plan.outputs_file, self.plan.stack_name)
        deployed = Verdict("deploy", True, f"stack {self.plan.stack_name} in {self.aws.region} after "
                                           f"{took(self.clock.now() - started)}")
        return [deployed, *self._exercise(outputs, started)]

    def _exercise(self, outputs: Outputs, started: float) -> list[Verdict]:
        """Send the probes at once, wait for a spec (ticking) and the output, then check."""
        run_id, kinesis = self.plan.prefix, self.aws.client("kinesis")
        first = self.clock.now()
        probes = events.probes(run_id, self.limits.events, int(first * 1000), self.fields)
        self.say(f"send: {len(probes):,} events to {outputs.ingest_stream} (no spec exists yet)")
        events.put_events(kinesis, outputs.ingest_stream, probes, self.clock, fields=self.fields,
                          progress=lambda done, total: self.say(f"send: {done:,}/{total:,} events put"))
        active = wait_for_active(self.aws.client("dynamodb"), outputs.control_table, self.clock, started=first,
                                 timeout_s=self.limits.active_s, poll_s=self.limits.poll_s,
                                 on_poll=lambda n: self._tick(outputs.ingest_stream, n), say=self.say)
        self.say(active.lines()[0])
        ids = events.probe_ids(run_id, self.limits.events)
        scanner = OutputScanner(self.aws.client("s3"), outputs.output_bucket)
        waited = 0.0
        if active.ok:
            waited = wait_for_output(scanner, ids, self.clock, timeout_s=self.limits.output_s,
                                     poll_s=self.limits.poll_s, say=self.say)
        else:
            scanner.scan()
        if self.tick_ids:
            self.say(f"ticks: {len(self.tick_ids):,} sent while no spec was active, "
                     f"{scanner.holding(self.tick_ids):,} in the output (not judged: they move the Spark job's "
                     f"event-time watermark)")
        return [active, check_delivery(ids, scanner.counts, scanner.where, waited_s=waited),
                check_failure_queue(self.aws.client("sqs"), outputs.failure_queue),
                count_access_denied(self.aws.client("logs"), outputs.judged_log_groups, int(started * 1000))]

    def _tick(self, stream: str, poll: int) -> None:
        batch = events.ticks(self.plan.prefix, poll, int(self.clock.now() * 1000), self.fields)
        events.put_events(self.aws.client("kinesis"), stream, batch, self.clock, fields=self.fields)
        self.tick_ids += [str(e[self.fields.event_id]) for e in batch]

    def _teardown(self) -> list[Verdict]:
        if not self.deployed:
            return []
        retained = self._retained()
        if self.keep:
            self.say(f"kept (--keep): destroy it with `{' '.join(self.plan.destroy_command())}`, then delete the "
                     f"geo streams {self.plan.prefix}-geo-v* (`aws kinesis delete-stream --stream-name ...`)")
            return []
        command = self.plan.destroy_command()
        self.say(f"destroy: {' '.join(command)}")
        status = self.run(command, cwd=self.plan.root, env=self._env())
        destroyed = Verdict("destroy", not status, f"stack {self.plan.stack_name} deleted" if not status else
                            f"cdk destroy exited {status}: the stack {self.plan.stack_name} may still exist; run "
                            f"the command again, or delete it in the CloudFormation console")
        try:
            streams = remove_geo_streams(self.aws.client("kinesis"), self.plan.prefix, self.clock,
                                         timeout_s=self.limits.streams_s, poll_s=min(self.limits.poll_s, 10.0))
        except (ClientError, BotoCoreError) as exc:
            streams = Verdict("geo streams gone", False, f"Kinesis could not be asked ({exc})")
        self._say_remains(retained, destroyed.ok)
        return [destroyed, streams]

    def _retained(self) -> list[str] | None:
        try:
            return retained_resources(self.plan.template_file)
        except GeorebalError as exc:
            self.say(f"what the stack retains is unknown: {exc}")
            return None

    def _say_remains(self, retained: list[str] | None, destroyed: bool) -> None:
        lines = [f"the stack {self.plan.stack_name} itself (the destroy failed)"] if not destroyed else []
        if retained:
            lines += [f"{r}: retained by the template" for r in retained]
        elif retained is not None:
            lines.append("no resource of the template is retained (retain_data=false)")
        lines += ["the stack's KMS keys, pending deletion for 30 days (the CDK's default window), then deleted",
                  "the CDK bootstrap's assets: the worker image (cdk-*-container-assets-* repository) and the code "
                  "zips (cdk-*-assets-* bucket), shared by every CDK app in the account and region"]
        self.say("what may remain in the account:")
        for line in lines:
            self.say(f"  - {line}")

    def _summary(self, verdicts: list[Verdict], seconds: float) -> int:
        self.say(f"summary ({took(seconds)}):")
        for verdict in verdicts:
            for line in verdict.lines():
                self.say(f"  {line}")
        failed = [v.name for v in verdicts if not v.ok]
        if failed:
            self.say(f"FAILED: {', '.join(failed)}")
            return EXIT_FAILED
        self.say(f"PASSED: all {len(verdicts)} checks")
        return EXIT_OK
