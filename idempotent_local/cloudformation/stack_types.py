"""The taught types that live only as stack state, declared as data: one row of :data:`STATE_TYPES` each.

Moto 5.2.5 skips ``AWS::SNS::Subscription``, ``AWS::SQS::QueuePolicy``, ``AWS::SNS::TopicPolicy``,
``AWS::CloudWatch::Alarm`` and ``AWS::CDK::Metadata`` (a deployed topic delivers nowhere), and does not
know ``AWS::S3::BucketPolicy`` (a bucket with ``enforce_ssl`` has one), ``AWS::SecretsManager::Secret``,
``AWS::ApiGateway::Stage`` or ``AWS::ApiGateway::Account`` (every CDK ``RestApi`` has them). Each is a
stack resource (:class:`StackResource`) whose effect lives in another backend: a row says how
``create`` makes it (with the resolved properties) and returns it with what undoes it, and how ``update``
changes it in place (none: the properties are only kept). A property that names the resource, or a change
that replaces it, is declared in ``_updates``; ``get_att`` lists exactly AWS's ``Fn::GetAtt`` attributes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moto.apigateway.models import apigateway_backends
from moto.cloudwatch.models import cloudwatch_backends
from moto.core.common_models import CloudFormationModel
from moto.s3.models import s3_backends
from moto.secretsmanager.models import secretsmanager_backends
from moto.sns.models import sns_backends
from moto.sqs.models import sqs_backends
from moto.utilities.utils import get_partition

from idempotent_local.cloudformation._common import StackResource, Taught, as_bool, queue_name, tags

Create = Callable[[str, dict[str, Any], str, str], StackResource]  # (name, props, account, region)
Update = Callable[[StackResource, dict[str, Any], str, str], object]


@dataclass(frozen=True)
class StateType:
    """One taught type kept as stack state: its ``type``, how it is made and changed, the property that names
    it ("" when none) and its ``Fn::GetAtt`` attributes (values in the resource's ``attributes``)."""

    type: str
    create: Create
    update: Update | None = None
    name: str = ""
    get_att: tuple[str, ...] = ()


class StateOnlyType(Taught):
    """What moto calls on a state-only type, answered by its row (``ROW``). Not a ``CloudFormationModel``
    subclass: moto finds types among that class's *direct* subclasses, so each type's class is
    ``class X(StateOnlyType, CloudFormationModel)`` (:data:`MODELS`). Deleting one is its resource's own
    ``delete``: the targets are only known resolved, on the resource (see ``StackResource.delete``)."""

    ROW: StateType

    @classmethod
    def create_resource(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> Any:
        return cls.ROW.create(name, props, account_id, region_name)

    @classmethod
    def update_resource(cls, resource: Any, props: dict[str, Any], account_id: str, region_name: str) -> Any:
        if cls.ROW.update is not None:
            cls.ROW.update(resource, props, account_id, region_name)
        resource.properties = props
        return resource


def recreated(create: Create) -> Update:
    """An update that does again what ``create`` did, under the resource's name (its physical id)."""
    return lambda resource, props, account_id, region_name: create(
        resource.physical_id, props, account_id, region_name
    )


# --- policies set on other resources ----------------------------------------------------------------------


def attached_policy(
    kind: str, targets: str, set_policy: Callable[[list[str], Any, str, str], None]
) -> StateType:
    """A policy document set on every resource listed under ``targets`` (``AWS::SQS::QueuePolicy``,
    ``AWS::SNS::TopicPolicy``): set on create, taken off the targets an update drops (``set_policy`` with
    None), and off every target still there on delete."""

    def detach(resolved: dict[str, Any], _: str, account_id: str, region_name: str) -> None:
        set_policy(resolved.get(targets, []), None, account_id, region_name)

    def create(name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
        set_policy(props[targets], props["PolicyDocument"], account_id, region_name)
        return StackResource(name, props, detach, {"Id": name})

    def update(resource: StackResource, props: dict[str, Any], account_id: str, region_name: str) -> None:
        kept = set(props[targets])
        dropped = [t for t in resource.properties.get(targets, []) if t not in kept]
        set_policy(dropped, None, account_id, region_name)
        set_policy(props[targets], props["PolicyDocument"], account_id, region_name)

    return StateType(kind, create, update, get_att=("Id",))


def _queue_policy(urls: list[str], document: Any, account_id: str, region_name: str) -> None:
    """Each queue's ``Policy`` attribute (a queue left, if it still exists, is left without one)."""
    queues = sqs_backends[account_id][region_name].queues
    for url in urls:
        queue = queues.get(queue_name(url))
        if queue is not None:
            queue.policy = json.dumps(document) if document is not None else ""


def _topic_policy(arns: list[str], document: Any, account_id: str, region_name: str) -> None:
    """Each topic's ``Policy`` attribute (a topic left gets its default policy back)."""
    for arn in arns:
        parts = arn.split(":")
        topic = sns_backends[parts[4]][parts[3]].topics.get(arn)
        if topic is not None:
            default = document is None
            topic._policy_json = topic._create_default_topic_policy(*parts[3:6]) if default else document


def _bucket_policy(name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
    """The bucket's policy (``GetBucketPolicy``), removed with the resource; another ``Bucket`` replaces
    it."""
    backend = s3_backends[account_id][get_partition(region_name)]

    def remove(resolved: dict[str, Any], _: str, account_id: str, region_name: str) -> None:
        if resolved.get("Bucket") in backend.buckets:  # a bucket deleted first takes its policy with it
            backend.delete_bucket_policy(resolved["Bucket"])

    document = props["PolicyDocument"]
    text = document if isinstance(document, str) else json.dumps(document)
    backend.put_bucket_policy(props["Bucket"], text.encode())
    return StackResource(props["Bucket"], props, remove)


# --- SNS subscriptions --------------------------------------------------------------------------------

SUBSCRIPTION_ATTRIBUTES = (
    "FilterPolicyScope",
    "FilterPolicy",
    "RawMessageDelivery",
    "RedrivePolicy",
    "DeliveryPolicy",
)


def _sns(arn: str) -> Any:
    """The SNS backend of a topic's (or subscription's) ARN."""
    parts = arn.split(":")
    return sns_backends[parts[4]][parts[3]]


def _subscription_attributes(arn: str, props: dict[str, Any], previous: dict[str, Any]) -> None:
    backend = _sns(arn)
    for name in SUBSCRIPTION_ATTRIBUTES:
        if name in props:
            value = props[name]
            if isinstance(value, dict | list):
                value = json.dumps(value)
            elif isinstance(value, bool):
                value = "true" if value else "false"
            backend.set_subscription_attributes(arn, name, str(value))
        elif name in previous:  # CloudFormation removes an attribute dropped from the template
            backend.set_subscription_attributes(arn, name, "false" if name == "RawMessageDelivery" else "")


def _subscribe(name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
    """A real moto subscription, so publishing to the topic delivers (its ``Ref`` is the ARN)."""
    arn = _sns(props["TopicArn"]).subscribe(props["TopicArn"], props["Endpoint"], props["Protocol"]).arn
    _subscription_attributes(arn, props, {})
    return StackResource(arn, props, lambda resolved, arn, *_: _sns(arn).unsubscribe(arn))


# --- Secrets Manager ----------------------------------------------------------------------------------

# GenerateSecretString's options and Secrets Manager's defaults (GetRandomPassword).
PASSWORD_OPTIONS = {
    "PasswordLength": ("password_length", 32),
    "ExcludeCharacters": ("exclude_characters", ""),
    "ExcludeNumbers": ("exclude_numbers", False),
    "ExcludePunctuation": ("exclude_punctuation", False),
    "ExcludeUppercase": ("exclude_uppercase", False),
    "ExcludeLowercase": ("exclude_lowercase", False),
    "IncludeSpace": ("include_space", False),
    "RequireEachIncludedType": ("require_each_included_type", True),
}


def secret_string(backend: Any, props: dict[str, Any]) -> str | None:
    """The template's ``SecretString``, or the one ``GenerateSecretString`` describes: a random password,
    alone or as ``GenerateStringKey`` in the JSON of ``SecretStringTemplate``."""
    if "SecretString" in props or "GenerateSecretString" not in props:
        return props.get("SecretString")
    spec = props["GenerateSecretString"] or {}
    options = {name: spec.get(key, default) for key, (name, default) in PASSWORD_OPTIONS.items()}
    password = json.loads(backend.get_random_password(**options))["RandomPassword"]
    if "SecretStringTemplate" in spec:
        document = json.loads(spec["SecretStringTemplate"])
        document[spec["GenerateStringKey"]] = password
        return json.dumps(document)
    return password


def _secret_name(backend: Any, arn: str) -> str | None:
    """The name of the secret ``arn`` (moto keeps secrets by name), or None once it is gone."""
    return next((name for name, secret in backend.secrets.items() if secret.arn == arn), None)


def _delete_secret(resolved: dict[str, Any], arn: str, account_id: str, region_name: str) -> None:
    backend = secretsmanager_backends[account_id][region_name]
    name = _secret_name(backend, arn)
    if name is not None:
        backend.delete_secret(name, recovery_window_in_days=None, force_delete_without_recovery=True)


def _create_secret(name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
    """A secret with the template's value, or a generated one; its ``Ref`` and ``Id`` are the ARN. Another
    ``Name`` replaces it, another value becomes a new version; deleting the stack deletes it at once."""
    backend = secretsmanager_backends[account_id][region_name]
    created = backend.create_secret(
        name=props.get("Name", name),
        secret_string=secret_string(backend, props),
        secret_binary=None,
        description=props.get("Description"),
        tags=[{"Key": k, "Value": v} for k, v in tags(props).items()],
        kms_key_id=props.get("KmsKeyId"),
        client_request_token=None,
        replica_regions=[],
        force_overwrite=False,
    )
    arn = json.loads(created)["ARN"]
    return StackResource(arn, props, _delete_secret, {"Id": arn})


def _update_secret(resource: StackResource, props: dict[str, Any], account_id: str, region_name: str) -> None:
    backend = secretsmanager_backends[account_id][region_name]
    changed_value = any(
        resource.properties.get(k) != props.get(k) for k in ("SecretString", "GenerateSecretString")
    )
    backend.update_secret(
        _secret_name(backend, resource.physical_id) or resource.physical_id,
        secret_string=secret_string(backend, props) if changed_value else None,
        kms_key_id=props.get("KmsKeyId"),
        description=props.get("Description", ""),
    )


# --- API Gateway ----------------------------------------------------------------------------------------


def _delete_stage(resolved: dict[str, Any], name: str, account_id: str, region_name: str) -> None:
    api = apigateway_backends[account_id][region_name].apis.get(resolved.get("RestApiId", ""))
    if api is not None:  # an API deleted first takes its stages with it
        api.stages.pop(name, None)


def _create_stage(name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
    """The REST API's stage (``GetStage``), pointing at the template's deployment; ``Ref`` is its name."""
    name = props.get("StageName", name)
    apigateway_backends[account_id][region_name].create_stage(
        props["RestApiId"],
        name,
        props.get("DeploymentId", ""),
        variables=props.get("Variables") or {},
        description=props.get("Description", ""),
        cacheClusterEnabled=props.get("CacheClusterEnabled"),
        cacheClusterSize=props.get("CacheClusterSize"),
        tags=tags(props) or None,
        tracing_enabled=props.get("TracingEnabled"),
    )
    return StackResource(name, props, _delete_stage)


def _update_stage(resource: StackResource, props: dict[str, Any], account_id: str, region_name: str) -> None:
    stage = apigateway_backends[account_id][region_name].get_stage(props["RestApiId"], resource.physical_id)
    stage.deployment_id = props.get("DeploymentId", "")
    stage.variables = props.get("Variables") or {}
    stage.description = props.get("Description", "")
    stage.tracing_enabled = props.get("TracingEnabled")


def _account_role(name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
    """The region's role that writes API logs to CloudWatch Logs (``GetAccount``'s ``cloudwatchRoleArn``),
    unset with the resource. The emulator writes no API logs."""

    def set_role(role_arn: str | None) -> None:
        apigateway_backends[account_id][region_name].account.cloudwatch_role_arn = role_arn

    set_role(props.get("CloudWatchRoleArn"))
    return StackResource(name, props, lambda *_: set_role(None), {"Id": name})


# --- CloudWatch alarms --------------------------------------------------------------------------------


def _put_alarm(name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
    """A metric alarm on a single metric, through moto's ``put_metric_alarm``; an update puts it again under
    its name (a new ``AlarmName`` replaces it)."""
    backend = cloudwatch_backends[account_id][region_name]
    name = props.get("AlarmName", name)
    alarm = backend.put_metric_alarm(
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
        actions_enabled=as_bool(props.get("ActionsEnabled", True)),
        treat_missing_data=props.get("TreatMissingData"),
        evaluate_low_sample_count_percentile=props.get("EvaluateLowSampleCountPercentile"),
        threshold_metric_id=props.get("ThresholdMetricId"),
    )
    return StackResource(name, props, lambda *_: backend.delete_alarms([name]), {"Arn": alarm.alarm_arn})


STATE_TYPES = (
    # CDK's usage record: CloudFormation stores it and does nothing.
    StateType("AWS::CDK::Metadata", lambda name, props, *_: StackResource(name, props)),
    StateType(
        "AWS::SNS::Subscription",  # no Fn::GetAtt attribute in AWS (its Ref is the ARN)
        _subscribe,
        lambda resource, props, *_: _subscription_attributes(
            resource.physical_id, props, resource.properties
        ),
    ),
    attached_policy("AWS::SNS::TopicPolicy", "Topics", _topic_policy),
    attached_policy("AWS::SQS::QueuePolicy", "Queues", _queue_policy),
    # No Fn::GetAtt attribute in AWS (its Ref is the bucket's name).
    StateType("AWS::S3::BucketPolicy", _bucket_policy, recreated(_bucket_policy)),
    StateType("AWS::SecretsManager::Secret", _create_secret, _update_secret, name="Name", get_att=("Id",)),
    StateType("AWS::ApiGateway::Stage", _create_stage, _update_stage, name="StageName"),
    StateType("AWS::ApiGateway::Account", _account_role, recreated(_account_role), get_att=("Id",)),
    StateType(
        "AWS::CloudWatch::Alarm", _put_alarm, recreated(_put_alarm), name="AlarmName", get_att=("Arn",)
    ),
)


# A model class per row, by type (AWS::SNS::Subscription: SNSSubscription), made once.
MODELS: dict[str, type] = {
    row.type: type(
        row.type.split("::", 1)[1].replace("::", ""),
        (StateOnlyType, CloudFormationModel),
        {"ROW": row, "TYPE": row.type, "NAME": row.name, "GET_ATT": dict.fromkeys(row.get_att, "attributes")},
    )
    for row in STATE_TYPES
}

__all__ = ["MODELS", "STATE_TYPES", "StateOnlyType", "StateType", "secret_string"]
