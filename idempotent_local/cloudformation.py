"""CloudFormation resource types the emulator is taught, so a CDK template deploys *wired*.

Moto's CloudFormation skips ``AWS::SNS::Subscription``, ``AWS::SQS::QueuePolicy``, ``AWS::SNS::TopicPolicy``,
``AWS::CloudWatch::Alarm`` and ``AWS::CDK::Metadata``, ignores a table's ``TimeToLiveSpecification`` and
point-in-time recovery, rejects a FIFO queue without an explicit name, replaces a topic (dropping its
subscriptions) on any change, and forgets a resource whose type has no update. Each class below is a moto
``CloudFormationModel`` for one type that does what CloudFormation does, through moto's own backends, so the
deployed template stays the single source of truth: nothing is created beside it.

Moto finds CloudFormation types through ``CloudFormationModel.__subclasses__()``; a later class for the same
type wins. :func:`install` defines nothing new: importing this module registers the classes, and ``install``
clears moto's caches and applies the two behaviour patches (see its docstring). It must run in the process
that serves the emulator, before the first stack is created.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from moto.cloudformation import parsing
from moto.cloudformation.exceptions import CloudFormationError
from moto.core.common_models import CloudFormationModel
from moto.core.responses import ActionResult, EmptyResult
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import Table as MotoTable
from moto.sns.models import Topic as MotoTopic
from moto.sns.models import sns_backends
from moto.sqs.models import Queue as MotoQueue
from moto.sqs.models import sqs_backends

log = logging.getLogger(__name__)

TAUGHT_TYPES = (
    "AWS::CDK::Metadata",
    "AWS::SNS::Subscription",
    "AWS::SNS::Topic",
    "AWS::SNS::TopicPolicy",
    "AWS::SQS::Queue",
    "AWS::SQS::QueuePolicy",
    "AWS::DynamoDB::Table",
    "AWS::CloudWatch::Alarm",
)


def _bool(value: Any) -> bool:
    return str(value).lower() == "true"


def _props(cloudformation_json: dict[str, Any]) -> dict[str, Any]:
    return cloudformation_json.get("Properties") or {}


def _queue_name(url_or_arn: str) -> str:
    return url_or_arn.rsplit("/", 1)[-1].rsplit(":", 1)[-1]


class _Resource:
    """A resource that lives only as CloudFormation state (its effect lives in another backend).

    ``deleter(properties, physical_id, account_id, region_name)`` undoes the effect. Moto deletes a resource
    through its ``delete`` method when it has one: with the *resolved* properties kept here, where the
    class-level ``delete_from_cloudformation_json`` would only see the template's unresolved ``Ref``s.
    """

    def __init__(self, physical_id: str, properties: dict[str, Any], deleter: Any = None) -> None:
        self.physical_id = physical_id
        self.properties = properties
        self.deleter = deleter

    @property
    def physical_resource_id(self) -> str:
        return self.physical_id

    def get_cfn_attribute(self, attribute_name: str) -> str:
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        raise UnformattedGetAttTemplateException()

    def delete(self, account_id: str, region_name: str) -> None:
        if self.deleter is not None:
            self.deleter(self.properties, self.physical_id, account_id, region_name)

    def is_created(self) -> bool:
        return True


class CdkMetadata(CloudFormationModel):
    """``AWS::CDK::Metadata``: CDK's usage record. Real CloudFormation stores it and does nothing."""

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CDK::Metadata"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> _Resource:
        return _Resource(resource_name, _props(cloudformation_json))

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: _Resource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> _Resource:
        original_resource.properties = _props(cloudformation_json)
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        return None


class SnsSubscription(CloudFormationModel):
    """``AWS::SNS::Subscription``: a real moto subscription, so publishing to the topic delivers."""

    ATTRIBUTES = (
        "FilterPolicyScope",
        "FilterPolicy",
        "RawMessageDelivery",
        "RedrivePolicy",
        "DeliveryPolicy",
    )

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::SNS::Subscription"

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
    ) -> _Resource:
        props = _props(cloudformation_json)
        backend = cls._backend(props["TopicArn"], account_id, region_name)
        subscription = backend.subscribe(props["TopicArn"], props["Endpoint"], props["Protocol"])
        cls._apply_attributes(backend, subscription.arn, props, {})
        return _Resource(subscription.arn, props, cls._unsubscribe)

    @classmethod
    def _unsubscribe(cls, props: dict[str, Any], arn: str, account_id: str, region_name: str) -> None:
        cls._backend(props["TopicArn"], account_id, region_name).unsubscribe(arn)

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: _Resource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> _Resource:
        props = _props(cloudformation_json)
        old = original_resource.properties
        if any(props.get(k) != old.get(k) for k in ("TopicArn", "Endpoint", "Protocol")):
            # These properties require replacement: subscribe anew, then remove the old subscription.
            replacement = cls.create_from_cloudformation_json(
                new_resource_name, cloudformation_json, account_id, region_name
            )
            cls._backend(old["TopicArn"], account_id, region_name).unsubscribe(original_resource.physical_id)
            return replacement
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
            queue = backend.get_queue(_queue_name(url))
            queue.policy = policy

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> _Resource:
        props = _props(cloudformation_json)
        cls._set(props["Queues"], json.dumps(props["PolicyDocument"]), account_id, region_name)
        return _Resource(resource_name, props, cls._remove)

    @classmethod
    def _remove(cls, props: dict[str, Any], physical_id: str, account_id: str, region_name: str) -> None:
        backend = sqs_backends[account_id][region_name]
        cls._set(
            [q for q in props.get("Queues", []) if _queue_name(q) in backend.queues],
            "",
            account_id,
            region_name,
        )

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: _Resource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> _Resource:
        props = _props(cloudformation_json)
        dropped = [q for q in original_resource.properties.get("Queues", []) if q not in props["Queues"]]
        cls._set(dropped, "", account_id, region_name)
        cls._set(props["Queues"], json.dumps(props["PolicyDocument"]), account_id, region_name)
        original_resource.properties = props
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        return None  # the queues are only known resolved, on the resource (see _Resource.delete)


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
    ) -> _Resource:
        props = _props(cloudformation_json)
        cls._set(props["Topics"], props["PolicyDocument"])
        return _Resource(resource_name, props, lambda p, *_: cls._set(p.get("Topics", []), None))

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: _Resource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> _Resource:
        props = _props(cloudformation_json)
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
        return None  # the topics are only known resolved, on the resource (see _Resource.delete)


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
        props = _props(cloudformation_json)
        name = props.get("TopicName", original_resource.name)
        if name != original_resource.name or _bool(props.get("FifoTopic")) != original_resource.name.endswith(
            ".fifo"
        ):
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


class SqsQueue(CloudFormationModel):
    """``AWS::SQS::Queue``: moto's, plus a generated ``.fifo`` name and in-place updates of attributes."""

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
        props = _props(cloudformation_json)
        if _bool(props.get("FifoQueue")) and "QueueName" not in props and not resource_name.endswith(".fifo"):
            # Real CloudFormation generates a name ending in .fifo for a FIFO queue; moto does not.
            resource_name = resource_name[: 80 - len(".fifo")] + ".fifo"
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
        props = _props(cloudformation_json)
        name = props.get("QueueName", original_resource.name)
        if name != original_resource.name or _bool(props.get("FifoQueue")) != original_resource.fifo_queue:
            replacement = cls.create_from_cloudformation_json(
                props.get("QueueName", new_resource_name), cloudformation_json, account_id, region_name
            )
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
                table.name, {"Enabled": _bool(ttl.get("Enabled")), "AttributeName": ttl["AttributeName"]}
            )
        elif table.ttl.get("TimeToLiveStatus") == "ENABLED":
            backend.update_time_to_live(
                table.name, {"Enabled": False, "AttributeName": table.ttl.get("AttributeName", "")}
            )
        pitr = props.get("PointInTimeRecoverySpecification") or {}
        backend.update_continuous_backups(
            table.name, {"PointInTimeRecoveryEnabled": _bool(pitr.get("PointInTimeRecoveryEnabled", False))}
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
        cls._apply(table, _props(cloudformation_json), account_id, region_name)
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
        props = _props(cloudformation_json)
        backend = dynamodb_backends[account_id][region_name]
        name = props.get("TableName", original_resource.name)
        if name != original_resource.name or props.get("KeySchema") != original_resource.schema:
            replacement = cls.create_from_cloudformation_json(
                props.get("TableName", new_resource_name), cloudformation_json, account_id, region_name
            )
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
            deletion_protection_enabled=_bool(props.get("DeletionProtectionEnabled", False)),
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


def _delete_alarm(props: dict[str, Any], name: str, account_id: str, region_name: str) -> None:
    from moto.cloudwatch.models import cloudwatch_backends

    cloudwatch_backends[account_id][region_name].delete_alarms([name])


class _AlarmResource(_Resource):
    def __init__(self, name: str, arn: str, properties: dict[str, Any]) -> None:
        super().__init__(name, properties, _delete_alarm)
        self.arn = arn

    def get_cfn_attribute(self, attribute_name: str) -> str:
        if attribute_name == "Arn":
            return self.arn
        return super().get_cfn_attribute(attribute_name)


class CloudWatchAlarm(CloudFormationModel):
    """``AWS::CloudWatch::Alarm`` on a single metric, through moto's ``put_metric_alarm``."""

    @staticmethod
    def cloudformation_name_type() -> str:
        return "AlarmName"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudWatch::Alarm"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == "Arn"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> _AlarmResource:
        from moto.cloudwatch.models import cloudwatch_backends

        props = _props(cloudformation_json)
        name = props.get("AlarmName", resource_name)
        alarm = cloudwatch_backends[account_id][region_name].put_metric_alarm(
            name=name,
            namespace=props.get("Namespace", ""),
            metric_name=props.get("MetricName", ""),
            comparison_operator=props["ComparisonOperator"],
            evaluation_periods=int(props["EvaluationPeriods"]),
            period=int(props.get("Period", 60)),
            threshold=float(props.get("Threshold", 0)),
            statistic=props.get("Statistic", ""),
            description=props.get("AlarmDescription", ""),
            dimensions=[{"Name": d["Name"], "Value": d["Value"]} for d in props.get("Dimensions", [])],
            alarm_actions=props.get("AlarmActions", []),
            datapoints_to_alarm=int(props["DatapointsToAlarm"]) if "DatapointsToAlarm" in props else None,
            extended_statistic=props.get("ExtendedStatistic"),
            ok_actions=props.get("OKActions", []),
            insufficient_data_actions=props.get("InsufficientDataActions", []),
            unit=props.get("Unit"),
            actions_enabled=_bool(props.get("ActionsEnabled", True)),
            treat_missing_data=props.get("TreatMissingData"),
            evaluate_low_sample_count_percentile=props.get("EvaluateLowSampleCountPercentile"),
            threshold_metric_id=props.get("ThresholdMetricId"),
        )
        return _AlarmResource(name, alarm.alarm_arn, props)

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: _AlarmResource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> _AlarmResource:
        from moto.cloudwatch.models import cloudwatch_backends

        props = _props(cloudformation_json)
        name = props.get("AlarmName", original_resource.physical_id)
        if name != original_resource.physical_id:
            cloudwatch_backends[account_id][region_name].delete_alarms([original_resource.physical_id])
        return cls.create_from_cloudformation_json(name, cloudformation_json, account_id, region_name)

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        from moto.cloudwatch.models import cloudwatch_backends

        cloudwatch_backends[account_id][region_name].delete_alarms([resource_name])


_original_parse_and_update = parsing.parse_and_update_resource


def _parse_and_update_keeping_unchanged(
    logical_id: str, resource_json: dict[str, Any], resources_map: Any, account_id: str, region_name: str
) -> Any:
    """Moto replaces a resource whose type has no update with ``None``, losing it (and every ``Ref`` to it).

    CloudFormation would update it; keeping the existing resource is the closest an emulator can do.
    """
    updated = _original_parse_and_update(logical_id, resource_json, resources_map, account_id, region_name)
    if updated is None:
        previous = resources_map._parsed_resources.get(logical_id)
        if previous is not None:
            log.warning(
                "no update support for %s (%s): kept as it was", logical_id, resource_json.get("Type")
            )
            return previous
    return updated


def _register_without_invoking(original: Any) -> Any:
    def create_event_source_mapping(self: Any, spec: dict[str, Any]) -> Any:
        esm = original(self, spec)
        # Moto invokes the function itself when a message arrives (it needs Docker for that, and would
        # consume the message); in the emulator the event-source runner is the one poller.
        for queue in sqs_backends[self.account_id][self.region_name].queues.values():
            queue.lambda_event_source_mappings.pop(esm.function_arn, None)
        return esm

    create_event_source_mapping._local_cloud = True  # type: ignore[attr-defined]
    return create_event_source_mapping


def _content_based_deduplication(original: Any) -> Any:
    def publish(self: Any, message: str, *args: Any, **kwargs: Any) -> str:
        # SNS gives a FIFO topic with content-based deduplication a deduplication id (the SHA-256 of the
        # body) and hands it to the subscribed queues; moto hands on none, which a FIFO queue without
        # content-based deduplication of its own rejects.
        if (
            self.fifo_topic
            and str(self.content_based_deduplication).lower() == "true"
            and not kwargs.get("deduplication_id")
        ):
            kwargs["deduplication_id"] = hashlib.sha256(message.encode()).hexdigest()
        return original(self, message, *args, **kwargs)

    publish._local_cloud = True  # type: ignore[attr-defined]
    return publish


class ChangeSetNotFound(CloudFormationError):
    code = "ChangeSetNotFound"


def _change_set_of_stack(response: Any) -> tuple[str | None, Any]:
    """The change set a request names, looked up within its stack (moto looks across all stacks)."""
    name = response._get_param("ChangeSetName")
    stack = response._get_param("StackName")
    change_sets = response.cloudformation_backend.change_sets
    if name in change_sets:
        return name, change_sets[name]
    for key, change_set in change_sets.items():
        if change_set.change_set_name == name and (
            not stack or stack in (change_set.stack_name, change_set.stack_id)
        ):
            return key, change_set
    return None, None


def _describe_change_set(self: Any) -> Any:
    _, change_set = _change_set_of_stack(self)
    if change_set is None:
        raise ChangeSetNotFound(f"ChangeSet [{self._get_param('ChangeSetName')}] does not exist")
    return ActionResult(change_set)


def _delete_change_set(self: Any) -> Any:
    # CloudFormation: deleting a change set that does not exist succeeds (the CDK CLI relies on it).
    key, _ = _change_set_of_stack(self)
    if key is not None:
        del self.cloudformation_backend.change_sets[key]
    return EmptyResult()


def _execute_change_set(self: Any) -> Any:
    key, change_set = _change_set_of_stack(self)
    if key is None:
        raise ChangeSetNotFound(f"ChangeSet [{self._get_param('ChangeSetName')}] does not exist")
    self.cloudformation_backend.execute_change_set(
        change_set_name=key, stack_name=self._get_param("StackName")
    )
    # Moto keeps the outputs (and description) of the template the stack had before the change set.
    stack = change_set.stack
    stack._parse_template()
    stack.output_map = stack._create_output_map()
    stack.description = stack.template_dict.get("Description")
    return EmptyResult()


_original_parse_ssm_parameter = parsing.ResourceMap.parse_ssm_parameter


def _parse_ssm_parameter(self: Any, value: str, value_type: str) -> Any:
    """An SSM-typed parameter kept with ``UsePreviousValue`` (the CDK CLI's ``BootstrapVersion`` on every
    update) arrives as the value resolved last time; moto looks that value up as a parameter name."""
    from moto.ssm import ssm_backends

    if ssm_backends[self._account_id][self._region_name].get_parameter(
        value
    ) is None and not value.startswith("/"):
        return value.split(",") if value_type.find("List") > 0 else value
    return _original_parse_ssm_parameter(self, value, value_type)


def _serve_code_location(endpoint: str) -> None:
    from moto.awslambda.models import LambdaFunction

    original = LambdaFunction.get_code
    if getattr(original, "_local_cloud", False):
        original = original._original  # type: ignore[attr-defined]

    def get_code(self: Any) -> dict[str, Any]:
        response = original(self)
        if "S3Bucket" in self.code and "S3Key" in self.code and "Code" in response:
            # The deployed artefact, downloadable from the emulator's S3 (path style).
            response["Code"]["Location"] = f"{endpoint}/{self.code['S3Bucket']}/{self.code['S3Key']}"
        return response

    get_code._local_cloud = True  # type: ignore[attr-defined]
    get_code._original = original  # type: ignore[attr-defined]
    LambdaFunction.get_code = get_code  # type: ignore[method-assign]


def install(endpoint: str | None = None) -> None:
    """Make this process's moto behave as the emulator needs.

    - the classes of this module take over their CloudFormation types (moto's type caches are cleared);
    - change sets are found within the stack the request names, and a missing one is ``ChangeSetNotFound``
      (moto searches every stack and answers ``ValidationError``, which breaks a CDK redeploy), and
      executing one refreshes the stack's outputs;
    - an SSM-typed parameter kept from the previous deployment is not looked up again;
    - a resource type without an update keeps its resource on update instead of losing it;
    - a FIFO topic with content-based deduplication hands a deduplication id to its queues, as SNS does;
    - an event source mapping does not make moto invoke the function (the runner polls instead);
    - with ``endpoint`` (``http://localhost:PORT``), ``GetFunction`` returns a ``Code.Location`` that
      downloads the deployed zip from the emulator.
    """
    from moto.awslambda.models import LambdaBackend
    from moto.cloudformation.responses import CloudFormationResponse

    CloudFormationResponse.describe_change_set = _describe_change_set  # type: ignore[method-assign]
    CloudFormationResponse.delete_change_set = _delete_change_set  # type: ignore[method-assign]
    CloudFormationResponse.execute_change_set = _execute_change_set  # type: ignore[method-assign]
    parsing.ResourceMap.parse_ssm_parameter = _parse_ssm_parameter  # type: ignore[method-assign]
    parsing.get_model_list.cache_clear()
    parsing.get_model_map.cache_clear()
    parsing.get_name_type_map.cache_clear()
    parsing.parse_and_update_resource = _parse_and_update_keeping_unchanged
    if not getattr(LambdaBackend.create_event_source_mapping, "_local_cloud", False):
        LambdaBackend.create_event_source_mapping = _register_without_invoking(  # type: ignore[method-assign]
            LambdaBackend.create_event_source_mapping
        )
    if not getattr(MotoTopic.publish, "_local_cloud", False):
        MotoTopic.publish = _content_based_deduplication(MotoTopic.publish)  # type: ignore[method-assign]
    if endpoint:
        _serve_code_location(endpoint)
    model_map = parsing.get_model_map()
    mine = {
        cls.cloudformation_type(): cls
        for cls in CloudFormationModel.__subclasses__()
        if cls.__module__ == __name__
    }
    for type_name in TAUGHT_TYPES:
        if model_map.get(type_name) is not mine[type_name]:
            raise RuntimeError(
                f"cloudformation type {type_name} is not taught: found {model_map.get(type_name)}"
            )


__all__ = ["TAUGHT_TYPES", "install"]
