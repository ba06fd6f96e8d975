"""``AWS::SNS::Subscription``: moto 5.2.5 skips the type, so a deployed topic delivers nowhere."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.sns.models import sns_backends

from idempotent_local.cloudformation._common import Declared, StackResource, properties


class SnsSubscription(Declared, CloudFormationModel):
    """``AWS::SNS::Subscription``: a real moto subscription, so publishing to the topic delivers."""

    TYPE = "AWS::SNS::Subscription"  # no Fn::GetAtt attribute in AWS (its Ref is the ARN)

    ATTRIBUTES = (
        "FilterPolicyScope",
        "FilterPolicy",
        "RawMessageDelivery",
        "RedrivePolicy",
        "DeliveryPolicy",
    )

    @staticmethod
    def _backend(topic_arn: str, account_id: str, region_name: str) -> Any:
        parts = topic_arn.split(":")
        if len(parts) >= 6:
            return sns_backends[parts[4]][parts[3]]
        return sns_backends[account_id][region_name]

    @classmethod
    def _apply_attributes(
        cls, backend: Any, arn: str, props: dict[str, Any], previous: dict[str, Any]
    ) -> None:
        for name in cls.ATTRIBUTES:
            if name in props:
                value = props[name]
                if isinstance(value, dict | list):
                    value = json.dumps(value)
                elif isinstance(value, bool):
                    value = "true" if value else "false"
                backend.set_subscription_attributes(arn, name, str(value))
            elif name in previous:
                # CloudFormation removes an attribute dropped from the template.
                reset = "false" if name == "RawMessageDelivery" else ""
                backend.set_subscription_attributes(arn, name, reset)

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
        backend = cls._backend(props["TopicArn"], account_id, region_name)
        subscription = backend.subscribe(props["TopicArn"], props["Endpoint"], props["Protocol"])
        cls._apply_attributes(backend, subscription.arn, props, {})
        return StackResource(subscription.arn, props, cls._unsubscribe)

    @classmethod
    def _unsubscribe(cls, props: dict[str, Any], arn: str, account_id: str, region_name: str) -> None:
        cls._backend(props["TopicArn"], account_id, region_name).unsubscribe(arn)

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: StackResource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> StackResource:
        """In place (a change that replaces the subscription never gets here: see ``_updates``)."""
        props = properties(cloudformation_json)
        old = original_resource.properties
        backend = cls._backend(props["TopicArn"], account_id, region_name)
        cls._apply_attributes(backend, original_resource.physical_id, props, old)
        original_resource.properties = props
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        # Only reached for a resource moto could not keep; the subscription ARN names its topic.
        sns_backends[account_id][region_name].unsubscribe(resource_name)
