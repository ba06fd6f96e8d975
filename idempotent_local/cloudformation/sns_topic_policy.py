"""``AWS::SNS::TopicPolicy``: moto 5.2.5 skips the type."""

from __future__ import annotations

from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.sns.models import sns_backends

from idempotent_local.cloudformation._common import StackResource, properties


class SnsTopicPolicy(CloudFormationModel):
    """``AWS::SNS::TopicPolicy``: sets the ``Policy`` attribute of every listed topic."""

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SNS::TopicPolicy"

    @staticmethod
    def _set(topics: list[str], document: dict[str, Any] | None) -> None:
        for arn in topics:
            parts = arn.split(":")
            backend = sns_backends[parts[4]][parts[3]]
            topic = backend.topics.get(arn)
            if topic is None:
                continue
            if document is None:
                topic._policy_json = topic._create_default_topic_policy(parts[3], parts[4], parts[5])
            else:
                topic._policy_json = document

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
        cls._set(props["Topics"], props["PolicyDocument"])
        return StackResource(resource_name, props, lambda p, *_: cls._set(p.get("Topics", []), None))

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
        cls._set(
            [t for t in original_resource.properties.get("Topics", []) if t not in props["Topics"]], None
        )
        cls._set(props["Topics"], props["PolicyDocument"])
        original_resource.properties = props
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        return None  # the topics are only known resolved, on the resource (see StackResource.delete)
