"""DynamoDB tables (docs/CONTRACTS.md): ``control`` (key ``pk``) and ``leases`` (key ``lease_key``).

On-demand billing, point-in-time recovery, encryption with a customer-managed KMS key, deletion protection when
``retain_data`` is on.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from geokernel.contracts.lease import LEASE_KEY_ATTR
from infra.config import GeoConfig


class ControlTables(Construct):
    """``control`` (desired/active/deploy/policy pointers) and ``leases`` (worker slot leases), one KMS ``key``."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY
        self.key = kms.Key(
            self, "Key", description=f"{config.prefix}: control and leases tables", enable_key_rotation=True, removal_policy=removal
        )
        self.control = self._table("Control", f"{config.prefix}-control", "pk", config, removal)
        # Pre-warmed when ``leases_warm_writes`` / ``leases_warm_reads`` is set or derived from ``fleet_workers``
        # (infra.fleet_size: 6 write and 14 read units/s per worker, twice the scale run's peaks per worker): a new
        # on-demand table sustains 4,000 write and 12,000 read units/s at once, and the leases table's peaks grow with
        # the fleet (bench/README.md). Pre-warming is charged once
        # (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html).
        warm = (dynamodb.WarmThroughput(write_units_per_second=config.leases_warm_writes or None,
                                        read_units_per_second=config.leases_warm_reads or None)
                if config.leases_warm_writes or config.leases_warm_reads else None)
        self.leases = self._table("Leases", f"{config.prefix}-leases", LEASE_KEY_ATTR, config, removal, warm)

    def _table(self, construct_id: str, name: str, key: str, config: GeoConfig, removal: RemovalPolicy,
               warm: dynamodb.WarmThroughput | None = None) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            construct_id,
            # A retained table outlives `cdk destroy`; a fixed name would make the next deploy with the same prefix
            # fail ("already exists"). Retained tables get CloudFormation's generated name (every reader takes the
            # name from the stack: environment variables and outputs).
            table_name=None if config.retain_data else name,
            partition_key=dynamodb.Attribute(name=key, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=self.key,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True),
            deletion_protection=config.retain_data,
            # state handoff items (geokernel/contracts/handoff.py) expire; nothing else sets the attribute
            time_to_live_attribute="expires_at" if key == "pk" else None,
            removal_policy=removal,
            warm_throughput=warm,
        )
