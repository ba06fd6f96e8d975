"""``AWS::DynamoDB::Table``: moto 5.2.5 ignores TTL and point-in-time recovery, replaces on update and
deletes the replaced table even with ``UpdateReplacePolicy: Retain``."""

from __future__ import annotations

from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import Table as MotoTable

from idempotent_local.cloudformation._common import as_bool, properties, retained_on_replace


class DynamoDbTable(CloudFormationModel):
    """``AWS::DynamoDB::Table``: moto's, plus TTL, point-in-time recovery and in-place updates."""

    REPLACING = ("TableName", "KeySchema")

    @staticmethod
    def cloudformation_name_type() -> str:
        return "TableName"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::DynamoDB::Table"

    @staticmethod
    def _apply(table: MotoTable, props: dict[str, Any], account_id: str, region_name: str) -> None:
        backend = dynamodb_backends[account_id][region_name]
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            backend.update_time_to_live(
                table.name, {"Enabled": as_bool(ttl.get("Enabled")), "AttributeName": ttl["AttributeName"]}
            )
        elif table.ttl.get("TimeToLiveStatus") == "ENABLED":
            backend.update_time_to_live(
                table.name, {"Enabled": False, "AttributeName": table.ttl.get("AttributeName", "")}
            )
        pitr = props.get("PointInTimeRecoverySpecification") or {}
        backend.update_continuous_backups(
            table.name, {"PointInTimeRecoveryEnabled": as_bool(pitr.get("PointInTimeRecoveryEnabled", False))}
        )

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> MotoTable:
        table = MotoTable.create_from_cloudformation_json(
            resource_name, cloudformation_json, account_id, region_name
        )
        cls._apply(table, properties(cloudformation_json), account_id, region_name)
        return table

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: MotoTable,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> MotoTable:
        props = properties(cloudformation_json)
        backend = dynamodb_backends[account_id][region_name]
        name = props.get("TableName", original_resource.name)
        if name != original_resource.name or props.get("KeySchema") != original_resource.schema:
            replacement = cls.create_from_cloudformation_json(
                props.get("TableName", new_resource_name), cloudformation_json, account_id, region_name
            )
            if not retained_on_replace(cloudformation_json):  # a retained table keeps its data
                backend.delete_table(original_resource.name)
            return replacement
        billing = "PAY_PER_REQUEST" if props.get("BillingMode") == "PAY_PER_REQUEST" else "PROVISIONED"
        backend.update_table(
            name=original_resource.name,
            attr_definitions=props.get("AttributeDefinitions", []),
            global_index=[],
            throughput=props.get("ProvisionedThroughput") or {},
            billing_mode=billing,
            # Moto refuses to enable a stream twice; an existing stream is left as it is.
            stream_spec={}
            if original_resource.latest_stream_label
            else props.get("StreamSpecification") or {},
            deletion_protection_enabled=as_bool(props.get("DeletionProtectionEnabled", False)),
            warm_throughput=None,
        )
        cls._apply(original_resource, props, account_id, region_name)
        if props.get("Tags"):
            backend.tag_resource(original_resource.table_arn, {t["Key"]: t["Value"] for t in props["Tags"]})
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        MotoTable.delete_from_cloudformation_json(resource_name, cloudformation_json, account_id, region_name)
