"""``AWS::SQS::Queue``: moto 5.2.5 rejects a FIFO queue without a name, cannot generate a valid name for
a standard one in a long stack, and updates only two attributes in place."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.sqs.models import Queue as MotoQueue
from moto.sqs.models import sqs_backends

from idempotent_local.cloudformation._common import as_bool, properties, retained_on_replace

MAX_NAME_LENGTH = 80
FIFO_SUFFIX = ".fifo"


def generated_name(name: str, *, fifo: bool) -> str:
    """The name CloudFormation gives a queue without ``QueueName``: ``STACK-LOGICALID-SUFFIX`` cut to 80
    characters, keeping the random suffix, and ending in ``.fifo`` for a FIFO queue (moto generates the
    same pattern uncut, which SQS rejects past 80 characters, and never adds ``.fifo``)."""
    name = name.removesuffix(FIFO_SUFFIX)
    limit = MAX_NAME_LENGTH - (len(FIFO_SUFFIX) if fifo else 0)
    if len(name) > limit:
        head, dash, suffix = name.rpartition("-")
        name = (
            f"{head[: limit - len(suffix) - 1]}-{suffix}"
            if dash and len(suffix) < limit // 2
            else name[:limit]
        )
    return name + FIFO_SUFFIX if fifo else name


class SqsQueue(CloudFormationModel):
    """``AWS::SQS::Queue``: moto's, plus generated names as CloudFormation makes them and in-place
    updates of attributes."""

    ATTRIBUTES = (
        "DelaySeconds",
        "MaximumMessageSize",
        "MessageRetentionPeriod",
        "ReceiveMessageWaitTimeSeconds",
        "VisibilityTimeout",
        "KmsMasterKeyId",
        "KmsDataKeyReusePeriodSeconds",
        "SqsManagedSseEnabled",
        "ContentBasedDeduplication",
        "DeduplicationScope",
        "FifoThroughputLimit",
        "RedrivePolicy",
        "RedriveAllowPolicy",
    )

    @staticmethod
    def cloudformation_name_type() -> str:
        return "QueueName"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SQS::Queue"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> MotoQueue:
        props = properties(cloudformation_json)
        if "QueueName" not in props:
            resource_name = generated_name(resource_name, fifo=as_bool(props.get("FifoQueue")))
        return MotoQueue.create_from_cloudformation_json(
            resource_name, cloudformation_json, account_id, region_name
        )

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: MotoQueue,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> MotoQueue:
        props = properties(cloudformation_json)
        name = props.get("QueueName", original_resource.name)
        if name != original_resource.name or as_bool(props.get("FifoQueue")) != original_resource.fifo_queue:
            replacement = cls.create_from_cloudformation_json(
                props.get("QueueName", new_resource_name), cloudformation_json, account_id, region_name
            )
            if not retained_on_replace(cloudformation_json):  # a retained queue keeps its messages
                sqs_backends[account_id][region_name].delete_queue(original_resource.name)
            return replacement
        attributes: dict[str, Any] = {}
        for key in cls.ATTRIBUTES:
            if key in props:
                value = props[key]
                attributes[key] = json.dumps(value) if isinstance(value, dict) else value
        if "RedrivePolicy" not in props:
            attributes["RedrivePolicy"] = ""
        # Moto's setter clears the policy unless it is passed along; it belongs to AWS::SQS::QueuePolicy.
        attributes["Policy"] = original_resource.policy
        original_resource._set_attributes(attributes)
        tags = {t["Key"]: t["Value"] for t in props.get("Tags", [])}
        if tags:
            original_resource.tags.update(tags)
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        MotoQueue.delete_from_cloudformation_json(resource_name, cloudformation_json, account_id, region_name)
