"""ECS adapter: the headless geo-worker service (task-definition revisions carrying ``SPEC_VERSION``, desired count).

The deployer's fleet (:class:`lambdas.deploy.fleet.EcsFleet`) drives the service through this adapter.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from geokernel.contracts.env import EnvVar
from lambdas.runtime.errors import AdapterError


class EcsService:
    """The geo-worker ECS service: register a revision carrying ``SPEC_VERSION`` and set the desired count."""

    def __init__(self, ecs: Any, cluster: str, service: str) -> None:
        self._ecs = ecs
        self.cluster = cluster
        self.service = service

    def current_task_definition(self) -> str:
        try:
            svcs = self._ecs.describe_services(cluster=self.cluster, services=[self.service])["services"]
        except ClientError as exc:
            raise AdapterError(f"cannot describe ECS service {self.service!r} in {self.cluster!r}: {exc}") from exc
        if not svcs:
            raise AdapterError(f"ECS service {self.service!r} not found in cluster {self.cluster!r}")
        return str(svcs[0]["taskDefinition"])

    def _describe(self, task_definition: str) -> dict[str, Any]:
        try:
            return dict(self._ecs.describe_task_definition(taskDefinition=task_definition)["taskDefinition"])
        except ClientError as exc:
            raise AdapterError(f"cannot describe task definition {task_definition!r}: {exc}") from exc

    def running_code(self) -> str:
        """The code the service runs: the template revision its revision was copied from (``CODE_REVISION``), or
        its own revision ARN when it runs a template revision itself."""
        current = self.current_task_definition()
        for c in self._describe(current)["containerDefinitions"]:
            for e in c.get("environment", []):
                if e.get("name") == EnvVar.CODE_REVISION and e.get("value"):
                    return str(e["value"])
        return current

    def running_spec_version(self) -> int | None:
        """``SPEC_VERSION`` of the revision the service runs (None: a generic carry-mode revision)."""
        for c in self._describe(self.current_task_definition())["containerDefinitions"]:
            for e in c.get("environment", []):
                if e.get("name") == EnvVar.SPEC_VERSION and str(e.get("value", "")).isdigit():
                    return int(e["value"])
        return None

    def deploying(self) -> bool:
        """True while ECS lists more than one deployment of the service (one is rolling out or back)."""
        try:
            svcs = self._ecs.describe_services(cluster=self.cluster, services=[self.service])["services"]
        except ClientError as exc:
            raise AdapterError(f"cannot describe ECS service {self.service!r} in {self.cluster!r}: {exc}") from exc
        return bool(svcs) and len(svcs[0].get("deployments", [])) > 1

    def register_revision(self, version: int, base: str = "") -> str:
        """Copy ``base`` (the stack's template revision; default: the service's current one) with
        ``SPEC_VERSION=<version>`` and ``CODE_REVISION=<base>`` on every container; return the new ARN."""
        base = base or self.current_task_definition()
        td = self._describe(base)
        marks = {EnvVar.SPEC_VERSION: str(version), EnvVar.CODE_REVISION: str(td.get("taskDefinitionArn") or base)}
        containers = []
        for c in td["containerDefinitions"]:
            env = [e for e in c.get("environment", []) if e.get("name") not in marks]
            env.extend({"name": k, "value": v} for k, v in marks.items())
            containers.append({**c, "environment": env})
        keep = ("taskRoleArn", "executionRoleArn", "networkMode", "volumes", "placementConstraints",
                "requiresCompatibilities", "cpu", "memory", "runtimePlatform", "ephemeralStorage", "pidMode",
                "ipcMode", "proxyConfiguration")
        kw = {k: td[k] for k in keep if td.get(k) not in (None, [], {})}
        try:
            out = self._ecs.register_task_definition(family=td["family"], containerDefinitions=containers, **kw)
        except ClientError as exc:
            raise AdapterError(f"cannot register a revision of {td['family']!r} for spec v{version}: {exc}") from exc
        return str(out["taskDefinition"]["taskDefinitionArn"])

    def deploy(self, task_definition: str, desired: int) -> None:
        """Point the service at ``task_definition`` with ``desired`` tasks (starts an ECS blue/green deployment)."""
        try:
            self._ecs.update_service(cluster=self.cluster, service=self.service, taskDefinition=task_definition,
                                     desiredCount=desired)
        except ClientError as exc:
            raise AdapterError(f"cannot update ECS service {self.service!r} to {task_definition!r}: {exc}") from exc

    def desired_count(self) -> int:
        """The service's desired count now (one DescribeServices)."""
        try:
            svcs = self._ecs.describe_services(cluster=self.cluster, services=[self.service])["services"]
        except ClientError as exc:
            raise AdapterError(f"cannot describe ECS service {self.service!r} in {self.cluster!r}: {exc}") from exc
        return int(svcs[0].get("desiredCount", 0)) if svcs else 0

    def scale(self, desired: int) -> None:
        """Set only the desired count: the current tasks keep running, ECS adds or removes tasks.

        A service deployment (and so ECS's blue/green lifecycle and its hooks) starts only when a property
        recorded in a service revision changes: task definition, networking, capacity providers, load
        balancers, ...; the desired count is not one of them, so this scales the current deployment
        (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/service-revision.html, "Service revision
        lifecycle": a revision is created "when you create a service, or update a service property that starts a
        deployment"; https://docs.aws.amazon.com/AmazonECS/latest/developerguide/service-revision-property.html
        lists the properties). On a scale-in ECS chooses which tasks stop but never a task whose scale-in
        protection is on (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-scale-in-protection.html):
        every worker holding a lease protects its task (``geo_service.runtime.protection``).
        """
        if desired < 0:
            raise AdapterError(f"desired count of ECS service {self.service!r} must be >= 0, got {desired!r}")
        try:
            self._ecs.update_service(cluster=self.cluster, service=self.service, desiredCount=desired)
        except ClientError as exc:
            raise AdapterError(f"cannot set the desired count of ECS service {self.service!r} to {desired}: "
                               f"{exc}") from exc
