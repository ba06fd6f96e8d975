"""``AWS::DynamoDB::Table``: moto 5.2.5 ignores TTL, point-in-time recovery and CloudFormation's shape of
``SSESpecification``, replaces the table on any update, never turns its stream off, and answers
``Fn::GetAtt StreamArn`` of a table without a stream."""

from __future__ import annotations

from typing import Any

from moto.cloudformation.exceptions import UnformattedGetAttTemplateException
from moto.core.common_models import CloudFormationModel
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import Table as MotoTable

from idempotent_local.cloudformation._common import Taught, adopt, as_bool, tags


def _encryption(props: dict[str, Any]) -> dict[str, Any] | None:
    """CloudFormation's ``SSESpecification`` (``SSEEnabled``) in moto's shape (``Enabled``); None, DynamoDB's
    default (an AWS owned key), when the template sets none or disables it."""
    sse = props.get("SSESpecification") or {}
    if not as_bool(sse.get("SSEEnabled")):
        return None
    encryption = {"Enabled": True, "SSEType": sse.get("SSEType", "KMS")}
    if sse.get("KMSMasterKeyId"):
        encryption["KMSMasterKeyId"] = sse["KMSMasterKeyId"]
    return encryption


class DynamoDbTable(Taught, MotoTable, CloudFormationModel):
    """``AWS::DynamoDB::Table``: moto's table plus TTL, point-in-time recovery and encryption, updated in
    place (a property the template no longer sets goes back to DynamoDB's default). Fn::GetAtt: moto's
    Arn and StreamArn, exactly AWS's (StreamArn only while the stream is enabled)."""

    TYPE, NAME = "AWS::DynamoDB::Table", "TableName"

    @staticmethod
    def _apply(table: MotoTable, props: dict[str, Any], account_id: str, region_name: str) -> None:
        """TTL, point-in-time recovery and encryption as ``props`` set them, each changed only when it
        differs (DynamoDB refuses to move TTL to another attribute while it is enabled)."""
        backend = dynamodb_backends[account_id][region_name]
        ttl = props.get("TimeToLiveSpecification") or {}
        enabled = as_bool(ttl.get("Enabled"))
        current = table.ttl
        attribute = ttl.get("AttributeName") if enabled else current.get("AttributeName")
        if (current.get("TimeToLiveStatus") == "ENABLED") != enabled or (
            enabled and attribute != current.get("AttributeName")
        ):
            backend.update_time_to_live(table.name, {"Enabled": enabled, "AttributeName": attribute or ""})
        pitr = props.get("PointInTimeRecoverySpecification") or {}
        backend.update_continuous_backups(
            table.name, {"PointInTimeRecoveryEnabled": as_bool(pitr.get("PointInTimeRecoveryEnabled", False))}
        )
        table.sse_specification = _encryption(props)

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        if attribute_name == "StreamArn" and self.stream_shard is None:
            raise UnformattedGetAttTemplateException()  # CloudFormation: StreamArn needs StreamSpecification
        return super().get_cfn_attribute(attribute_name)

    @staticmethod
    def _update_stream(table: MotoTable, props: dict[str, Any], account_id: str, region_name: str) -> None:
        """The stream as ``StreamSpecification`` says: on, off, or (another ``StreamViewType``) off and on
        again, since DynamoDB cannot change the view type of an enabled stream. Each enabling makes a new
        stream, with a new ``StreamArn``."""
        wanted = (props.get("StreamSpecification") or {}).get("StreamViewType")
        enabled = table.stream_specification if table.stream_shard is not None else None
        current = (enabled or {}).get("StreamViewType")
        if wanted == current:
            return
        backend = dynamodb_backends[account_id][region_name]
        if current:
            backend.update_table_streams(table, {"StreamEnabled": False})
        if wanted:
            backend.update_table_streams(table, {"StreamEnabled": True, "StreamViewType": wanted})

    @classmethod
    def create_resource(
        cls, name: str, props: dict[str, Any], account_id: str, region_name: str
    ) -> DynamoDbTable:
        table = MotoTable.create_from_cloudformation_json(
            name, {"Properties": props}, account_id, region_name
        )
        cls._apply(table, props, account_id, region_name)
        return adopt(table, cls)

    @classmethod
    def update_resource(
        cls, table: DynamoDbTable, props: dict[str, Any], account_id: str, region_name: str
    ) -> DynamoDbTable:
        billing = "PAY_PER_REQUEST" if props.get("BillingMode") == "PAY_PER_REQUEST" else "PROVISIONED"
        dynamodb_backends[account_id][region_name].update_table(
            name=table.name,
            attr_definitions=props.get("AttributeDefinitions", []),
            global_index=[],
            throughput=props.get("ProvisionedThroughput") or {},
            billing_mode=billing,
            stream_spec={},  # see _update_stream
            deletion_protection_enabled=as_bool(props.get("DeletionProtectionEnabled", False)),
            warm_throughput=None,
        )
        cls._apply(table, props, account_id, region_name)
        cls._update_stream(table, props, account_id, region_name)
        table.tags = [{"Key": k, "Value": v} for k, v in tags(props).items()]
        return table

    def delete(self, account_id: str, region_name: str) -> None:
        self.delete_resource(self.name, account_id, region_name)

    @classmethod
    def delete_resource(cls, name: str, account_id: str, region_name: str) -> None:
        backend = dynamodb_backends[account_id][region_name]
        if name in backend.tables:
            backend.delete_table(name)
