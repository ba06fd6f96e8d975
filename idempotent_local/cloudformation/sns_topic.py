"""``AWS::SNS::Topic``: moto 5.2.5 replaces a topic on any change, dropping its subscriptions."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.sns.models import Topic as MotoTopic
from moto.sns.models import sns_backends

from idempotent_local.cloudformation._common import as_bool, properties


class SnsTopic(CloudFormationModel):
    """``AWS::SNS::Topic``: moto's, but updated in place (moto replaces it and drops its subscriptions)."""

    IN_PLACE = (
        "DisplayName",
        "KmsMasterKeyId",
        "ContentBasedDeduplication",
        "SignatureVersion",
        "TracingConfig",
        "ArchivePolicy",
        "FifoThroughputScope",
    )

    @staticmethod
    def cloudformation_name_type() -> str:
        return "TopicName"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SNS::Topic"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> MotoTopic:
        return MotoTopic.create_from_cloudformation_json(
            resource_name, cloudformation_json, account_id, region_name
        )

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: MotoTopic,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> MotoTopic:
        props = properties(cloudformation_json)
        name = props.get("TopicName", original_resource.name)
        if name != original_resource.name or as_bool(
            props.get("FifoTopic")
        ) != original_resource.name.endswith(".fifo"):
            replacement = cls.create_from_cloudformation_json(
                name, cloudformation_json, account_id, region_name
            )
            original_resource.delete(account_id, region_name)
            return replacement
        backend = sns_backends[account_id][region_name]
        for key in cls.IN_PLACE:
            if key in props:
                value = props[key]
                if isinstance(value, bool):
                    value = "true" if value else "false"
                elif isinstance(value, dict):
                    value = json.dumps(value)
                attribute = {
                    "KmsMasterKeyId": "kms_master_key_id",
                    "DisplayName": "display_name",
                    "ContentBasedDeduplication": "content_based_deduplication",
                }.get(key, key)
                backend.set_topic_attribute(original_resource.arn, attribute, value)
        tags = {t["Key"]: t["Value"] for t in props.get("Tags", [])}
        if tags:
            backend.tag_resource(original_resource.arn, tags)
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        sns_backends[account_id][region_name].delete_topic(resource_name)
