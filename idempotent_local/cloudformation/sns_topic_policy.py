"""``AWS::SNS::TopicPolicy``: moto 5.2.5 skips the type."""

from __future__ import annotations

from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.sns.models import sns_backends

from idempotent_local.cloudformation._common import AttachedPolicy


class SnsTopicPolicy(AttachedPolicy, CloudFormationModel):
    """``AWS::SNS::TopicPolicy``: sets the ``Policy`` attribute of every listed topic (a topic it leaves
    gets its default policy back)."""

    TYPE = "AWS::SNS::TopicPolicy"
    TARGETS = "Topics"

    @classmethod
    def _set(cls, topics: list[str], document: dict[str, Any] | None) -> None:
        for arn in topics:
            parts = arn.split(":")
            topic = sns_backends[parts[4]][parts[3]].topics.get(arn)
            if topic is None:
                continue
            if document is None:
                topic._policy_json = topic._create_default_topic_policy(parts[3], parts[4], parts[5])
            else:
                topic._policy_json = document

    @classmethod
    def attach(cls, targets: list[str], document: dict[str, Any], account_id: str, region_name: str) -> None:
        cls._set(targets, document)

    @classmethod
    def detach(cls, targets: list[str], account_id: str, region_name: str) -> None:
        cls._set(targets, None)
