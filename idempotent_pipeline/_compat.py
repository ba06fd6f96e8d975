"""Escape hatches: the few newer aws-cdk-lib APIs the constructs use, on every supported release.

The supported range is ``pyproject.toml``'s. Each helper uses aws-cdk-lib's own API where the installed
release has it and otherwise writes the same CloudFormation by hand, so the templates of the oldest and the
newest release differ only by the ``cdk_nag`` metadata of :func:`acknowledge` and by what older releases
write themselves (an empty ``{"Ref": "AWS::NoValue"}`` resource in table grants). Nothing here imports
cdk-nag.
"""

from __future__ import annotations

import importlib.metadata
import re
from typing import Any, cast

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import IConstruct

# cdk-nag 3 (aws-cdk-lib 2.257 on) reads acknowledgements through Validations; cdk-nag 2 reads this metadata.
NAG_METADATA = "cdk_nag"
_FINDING = re.compile(r"(?P<rule>[^\[\]]+)(?:\[(?P<applies_to>.+)\])?")


def acknowledge(scope: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge a cdk-nag finding (``AwsSolutions-IAM5[Resource::*]``) on ``scope`` and what it holds.

    With ``Validations`` (cdk-nag 3) this is ``Validations.of(scope).acknowledge(...)``. Before it, the
    suppression cdk-nag 2 reads (what its ``NagSuppressions`` writes) goes into the ``cdk_nag`` metadata of
    every CloudFormation resource under ``scope`` at the time of the call: the templates then differ by
    that metadata.
    """
    if hasattr(cdk, "Validations"):
        cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))
        return
    match = _FINDING.fullmatch(finding)
    assert match is not None, finding
    suppression: dict[str, Any] = {"id": match["rule"], "reason": reason}
    if match["applies_to"]:
        suppression["appliesTo"] = [match["applies_to"]]
    for node in scope.node.find_all():
        if cdk.CfnResource.is_cfn_resource(node):
            resource: Any = node
            existing = (resource.get_metadata(NAG_METADATA) or {}).get("rules_to_suppress", [])
            if suppression not in existing:
                resource.add_metadata(NAG_METADATA, {"rules_to_suppress": [*existing, suppression]})


def point_in_time_recovery(enabled: bool) -> dict[str, Any]:
    """``dynamodb.Table`` keyword arguments for point-in-time recovery (``**`` them into the call):
    ``point_in_time_recovery_specification``, or before it the ``point_in_time_recovery`` it deprecates."""
    if hasattr(dynamodb, "PointInTimeRecoverySpecification"):
        specification = dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=enabled)
        return {"point_in_time_recovery_specification": specification}
    return {"point_in_time_recovery": enabled}


def message_group_throughput(topic: sns.Topic) -> None:
    """A FIFO topic's throughput per message group: CloudFormation's ``FifoThroughputScope``, which older
    releases have no property for (``sns.Topic(fifo_throughput_scope=...)`` writes the same)."""
    resource: Any = topic.node.default_child
    resource.add_property_override("FifoThroughputScope", "MessageGroup")


# The first release whose sns.Topic(enforce_ssl=True) writes its TLS-only policy by itself.
ENFORCE_SSL_ALONE = (2, 176)
CDK_RELEASE = tuple(int(part) for part in importlib.metadata.version("aws-cdk-lib").split(".")[:2])


def tls_only_topic(topic: sns.Topic) -> None:
    """``sns.Topic(enforce_ssl=True)`` with its policy: older releases (2.175 and before) write the TLS-only
    statement only once another statement is added to the topic's policy; without one, plain HTTP works.
    Newer ones are not asked (two round trips)."""
    if CDK_RELEASE >= ENFORCE_SSL_ALONE or topic.node.try_find_child("Policy") is not None:
        return
    topic.add_to_resource_policy(
        iam.PolicyStatement(  # the statement CDK writes
            sid="AllowPublishThroughSSLOnly",
            effect=iam.Effect.DENY,
            principals=[iam.StarPrincipal()],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={"Bool": {"aws:SecureTransport": "false"}},
        )
    )


def topic_key(topic: sns.ITopic) -> kms.IKey | None:
    """A topic's KMS key (``ITopic.master_key``). Before releases had it, a new topic's key is found from its
    CloudFormation resource: a key of the app by reference, any other key as imported (by its ARN)."""
    try:
        return topic.master_key
    except AttributeError:
        pass
    if not isinstance(topic, sns.Topic):  # imported: older releases cannot import a topic's key either
        return None
    key_arn = cast(sns.CfnTopic, topic.node.default_child).kms_master_key_id
    if key_arn is None:
        return None
    if cdk.Token.is_unresolved(key_arn):
        target = getattr(cdk.Tokenization.reverse_string(key_arn).first_token, "target", None)
        if target is not None and isinstance(target.node.scope, kms.Key):
            return target.node.scope
    known = topic.node.try_find_child("MasterKey")
    return cast(kms.IKey, known) if known is not None else kms.Key.from_key_arn(topic, "MasterKey", key_arn)


def key_schema(table: dynamodb.Table) -> tuple[list[dynamodb.Attribute], list[dynamodb.Attribute]]:
    """A table's partition and sort key attributes: ``table.schema_v2()``, or before it ``table.schema()``
    (one partition key, at most one sort key)."""
    if hasattr(table, "schema_v2"):
        schema = table.schema_v2()
        return list(schema.partition_keys), list(schema.sort_keys)
    old: Any = table.schema()
    return [old.partition_key], [old.sort_key] if old.sort_key is not None else []
