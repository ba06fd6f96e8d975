"""``AWS::SNS::Topic``: moto 5.2.5 replaces a topic on any change, dropping its subscriptions, and lacks
the ``TopicArn`` attribute."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.sns.models import Topic as MotoTopic
from moto.sns.models import sns_backends

from idempotent_local.cloudformation._common import Taught, adopt, as_bool, tags


def _subscriptions(props: dict[str, Any]) -> set[tuple[str, str]]:
    """The topic's inline ``Subscription`` property as ``(protocol, endpoint)`` pairs."""
    return {(s["Protocol"], s["Endpoint"]) for s in props.get("Subscription") or []}


class SnsTopic(Taught, MotoTopic, CloudFormationModel):
    """``AWS::SNS::Topic``: a moto topic, updated in place (a property the template no longer sets goes
    back to SNS's default; inline subscriptions follow the ``Subscription`` property)."""

    # Property: (moto's attribute, SNS's default).
    IN_PLACE: dict[str, tuple[str, Any]] = {
        "DisplayName": ("display_name", ""),
        "KmsMasterKeyId": ("kms_master_key_id", ""),
        "ContentBasedDeduplication": ("content_based_deduplication", False),
        "SignatureVersion": ("signature_version", "1"),
        "TracingConfig": ("tracing_config", "PassThrough"),
        "ArchivePolicy": ("archive_policy", ""),
        "FifoThroughputScope": ("fifo_throughput_scope", ""),
    }
    TYPE, NAME = "AWS::SNS::Topic", "TopicName"
    GET_ATT = {"TopicArn": "arn", "TopicName": "name"}  # exactly AWS's

    cfn_properties: dict[str, Any]  # the template's properties it was last deployed with

    @classmethod
    def create_resource(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> SnsTopic:
        created = MotoTopic.create_from_cloudformation_json(
            name, {"Properties": props}, account_id, region_name
        )
        topic = adopt(created, cls)
        topic.cfn_properties = props
        return topic

    @classmethod
    def update_resource(
        cls, topic: SnsTopic, props: dict[str, Any], account_id: str, region_name: str
    ) -> SnsTopic:
        for key, (attribute, default) in cls.IN_PLACE.items():
            value = props.get(key, default)
            if isinstance(value, bool) or key == "ContentBasedDeduplication":
                value = "true" if as_bool(value) else "false"
            elif isinstance(value, dict):
                value = json.dumps(value)
            setattr(topic, attribute, value)
        topic._tags = tags(props)
        backend = sns_backends[account_id][region_name]
        old, new = _subscriptions(topic.cfn_properties), _subscriptions(props)
        for protocol, endpoint in new - old:
            backend.subscribe(topic.arn, endpoint, protocol)
        for subscription in list(backend.subscriptions.values()):
            if (
                subscription.topic_arn == topic.arn
                and (subscription.protocol, subscription.endpoint) in old - new
            ):
                backend.unsubscribe(subscription.arn)
        topic.cfn_properties = props
        return topic

    @classmethod
    def delete_resource(cls, name: str, account_id: str, region_name: str) -> None:
        backend = sns_backends[account_id][region_name]
        if name in backend.topics:
            backend.delete_topic(name)
