"""``AWS::SQS::QueuePolicy``: moto 5.2.5 skips the type."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.sqs.models import sqs_backends

from idempotent_local.cloudformation._common import StackResource, properties, queue_name


class SqsQueuePolicy(CloudFormationModel):
    """``AWS::SQS::QueuePolicy``: sets the ``Policy`` attribute of every listed queue."""

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SQS::QueuePolicy"

    @staticmethod
    def _set(queues: list[str], policy: str, account_id: str, region_name: str) -> None:
        backend = sqs_backends[account_id][region_name]
        for url in queues:
            queue = backend.get_queue(queue_name(url))
            queue.policy = policy

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> StackResource:
        props = properties(cloudformation_json)
        cls._set(props["Queues"], json.dumps(props["PolicyDocument"]), account_id, region_name)
        return StackResource(resource_name, props, cls._remove)

    @classmethod
    def _remove(cls, props: dict[str, Any], physical_id: str, account_id: str, region_name: str) -> None:
        backend = sqs_backends[account_id][region_name]
        cls._set(
            [q for q in props.get("Queues", []) if queue_name(q) in backend.queues],
            "",
            account_id,
            region_name,
        )

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: StackResource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> StackResource:
        props = properties(cloudformation_json)
        dropped = [q for q in original_resource.properties.get("Queues", []) if q not in props["Queues"]]
        cls._set(dropped, "", account_id, region_name)
        cls._set(props["Queues"], json.dumps(props["PolicyDocument"]), account_id, region_name)
        original_resource.properties = props
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        return None  # the queues are only known resolved, on the resource (see StackResource.delete)
