"""IdempotencyTable: the DynamoDB table whose composite key makes a write happen once."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from idempotent_pipeline._checks import ConfigurationError, require_name

DEFAULT_PARTITION_KEY = "pk"
DEFAULT_SORT_KEY = "sk"
DEFAULT_TTL_ATTRIBUTE = "expires_at"


class IdempotencyTable(Construct):
    """A DynamoDB table with a string partition key and a string sort key, a TTL attribute, on-demand billing,
    point-in-time recovery and encryption at rest.

    :param partition_key_name: the partition key attribute (type string). Default: ``pk``.
    :param sort_key_name: the sort key attribute (type string). Default: ``sk``.
    :param time_to_live_attribute: the TTL attribute (epoch seconds). Default: ``expires_at``.
    :param removal_policy: what happens to the table when it leaves the stack. Default: RETAIN (it holds
        user data).
    :param point_in_time_recovery: continuous backups. Default: True.
    :param encryption_key: a customer-managed KMS key. Default: the AWS-owned key DynamoDB uses by default.
    :param deletion_protection: refuse DeleteTable. Default: False.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        partition_key_name: str = DEFAULT_PARTITION_KEY,
        sort_key_name: str = DEFAULT_SORT_KEY,
        time_to_live_attribute: str = DEFAULT_TTL_ATTRIBUTE,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        point_in_time_recovery: bool = True,
        encryption_key: kms.IKey | None = None,
        deletion_protection: bool = False,
    ) -> None:
        super().__init__(scope, id)
        check_key_names(partition_key_name, sort_key_name, time_to_live_attribute)
        self.partition_key_name = partition_key_name
        self.sort_key_name = sort_key_name
        self.time_to_live_attribute = time_to_live_attribute
        # AWS::DynamoDB::Table (dynamodb.Table), not TableV2's AWS::DynamoDB::GlobalTable: the same table for
        # one region, and a type local CloudFormation emulators can create.
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=partition_key_name, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=sort_key_name, type=dynamodb.AttributeType.STRING),
            time_to_live_attribute=time_to_live_attribute,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=point_in_time_recovery
            ),
            encryption=(
                dynamodb.TableEncryption.CUSTOMER_MANAGED
                if encryption_key is not None
                else dynamodb.TableEncryption.DEFAULT
            ),
            encryption_key=encryption_key,
            removal_policy=removal_policy,
            deletion_protection=deletion_protection,
        )


def check_key_names(partition_key_name: str, sort_key_name: str, time_to_live_attribute: str) -> None:
    """Key and TTL attribute names must be non-empty and distinct."""
    require_name("partition_key_name", partition_key_name)
    require_name("sort_key_name", sort_key_name)
    require_name("time_to_live_attribute", time_to_live_attribute)
    if partition_key_name == sort_key_name:
        raise ConfigurationError(
            f"partition_key_name and sort_key_name must differ; both are {partition_key_name!r}"
        )
    if time_to_live_attribute in (partition_key_name, sort_key_name):
        raise ConfigurationError(
            "time_to_live_attribute must differ from the key attributes; "
            f"got {time_to_live_attribute!r} (keys {partition_key_name!r}, {sort_key_name!r})"
        )
