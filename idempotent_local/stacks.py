"""Read deployed stacks back from the emulator (client side), and check that what they list exists."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from idempotent_local.cdk import BOOTSTRAP_STACK
from idempotent_local.emulator import NOTE_PREFIX, Emulator


@dataclass(frozen=True)
class StackSummary:
    name: str
    status: str
    resources: int
    not_created: list[tuple[str, str]]  # (logical id, type) in the template but not in the emulator
    outputs: dict[str, str] = field(default_factory=dict)
    # (logical id, type, physical id, what does not exist: the resource or one it needs)
    missing: list[tuple[str, str, str, str]] = field(default_factory=list)
    status_reason: str = ""
    notes: list[str] = field(default_factory=list)  # what the emulator did not model in the last update

    def problems(self) -> list[str]:
        """One sentence per resource of the template that does not exist in the emulator."""
        return [
            f"{logical} ({kind}) was not created: the emulator does not know this type"
            for logical, kind in self.not_created
        ] + [
            f"{logical} ({kind}) is in the stack as {physical}, but {absent} does not exist in the emulator"
            for logical, kind, physical, absent in self.missing
        ]


class Absent(LookupError):
    """What of a resource does not exist: the resource itself, or one it needs."""


def _sqs_queue(emulator: Emulator, physical: str) -> None:
    emulator.client("sqs").get_queue_attributes(QueueUrl=physical, AttributeNames=["QueueArn"])


def _sns_topic(emulator: Emulator, physical: str) -> None:
    emulator.client("sns").get_topic_attributes(TopicArn=physical)


def _sns_subscription(emulator: Emulator, physical: str) -> None:
    emulator.client("sns").get_subscription_attributes(SubscriptionArn=physical)


def _dynamodb_table(emulator: Emulator, physical: str) -> None:
    emulator.client("dynamodb").describe_table(TableName=physical)


def _lambda_function(emulator: Emulator, physical: str) -> None:
    emulator.client("lambda").get_function_configuration(FunctionName=physical)


def _event_source_mapping(emulator: Emulator, physical: str) -> None:
    source = emulator.client("lambda").get_event_source_mapping(UUID=physical)["EventSourceArn"]
    service = source.split(":")[2]
    try:  # the queue or stream it reads must exist too
        if service == "sqs":
            _, _, _, _, account, name = source.split(":", 5)
            emulator.client("sqs").get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)
        elif service == "dynamodb":
            emulator.client("dynamodbstreams").describe_stream(StreamArn=source)
    except ClientError:
        raise Absent(f"the {'queue' if service == 'sqs' else 'stream'} it reads, {source},") from None


def _kms_key(emulator: Emulator, physical: str) -> None:
    state = emulator.client("kms").describe_key(KeyId=physical)["KeyMetadata"]["KeyState"]
    if state in ("PendingDeletion", "PendingReplicaDeletion"):
        raise Absent(f"{physical} ({state})")


def _alarm(emulator: Emulator, physical: str) -> None:
    if not emulator.client("cloudwatch").describe_alarms(AlarmNames=[physical])["MetricAlarms"]:
        raise Absent(physical)


def _iam_role(emulator: Emulator, physical: str) -> None:
    emulator.client("iam").get_role(RoleName=physical)


# How to see that a resource of each type exists: each raises ClientError when it does not, or Absent naming
# what else it needs that does not. Other types are not checked.
EXISTS: dict[str, Callable[[Emulator, str], None]] = {
    "AWS::SQS::Queue": _sqs_queue,
    "AWS::SNS::Topic": _sns_topic,
    "AWS::SNS::Subscription": _sns_subscription,
    "AWS::DynamoDB::Table": _dynamodb_table,
    "AWS::Lambda::Function": _lambda_function,
    "AWS::Lambda::EventSourceMapping": _event_source_mapping,
    "AWS::KMS::Key": _kms_key,
    "AWS::CloudWatch::Alarm": _alarm,
    "AWS::IAM::Role": _iam_role,
}


def _absent(emulator: Emulator, kind: str, physical: str) -> str | None:
    """What of this resource does not exist in the emulator (itself, or one it needs), or None."""
    check = EXISTS.get(kind)
    try:
        if check is not None:
            check(emulator, physical)
    except ClientError:
        return physical
    except Absent as absent:
        return str(absent)
    return None


def _template(cloudformation: Any, name: str) -> dict[str, Any]:
    body = cloudformation.get_template(StackName=name)["TemplateBody"]
    try:
        return json.loads(body) if isinstance(body, str) else dict(body)
    except ValueError:
        return {}  # a YAML template (the bootstrap stack's): not checked


def _notes(cloudformation: Any, name: str) -> list[str]:
    """The emulator's notes on the stack's last operation (its events since its last *_IN_PROGRESS), one
    per note and type, naming the resources it concerns."""
    concerned: dict[tuple[str, str], list[str]] = {}
    for event in cloudformation.describe_stack_events(StackName=name)["StackEvents"]:  # newest first
        if event["LogicalResourceId"] == name and event["ResourceStatus"].endswith("_IN_PROGRESS"):
            break
        reason = event.get("ResourceStatusReason") or ""
        if reason.startswith(NOTE_PREFIX):
            key = (event["ResourceType"], reason.removeprefix(NOTE_PREFIX))
            concerned.setdefault(key, []).insert(0, event["LogicalResourceId"])
    return [f"{', '.join(ids)} ({kind}): {note}" for (kind, note), ids in reversed(concerned.items())]


def deployed_stacks(emulator: Emulator, *, include_bootstrap: bool = False) -> list[StackSummary]:
    """Every live stack, with the template resources the emulator did not create and the listed resources
    that do not exist in it (both should be none)."""
    cloudformation = emulator.client("cloudformation")
    summaries = []
    for page in cloudformation.get_paginator("describe_stacks").paginate():
        for stack in page["Stacks"]:
            name = stack["StackName"]
            if stack["StackStatus"] == "DELETE_COMPLETE" or (
                name == BOOTSTRAP_STACK and not include_bootstrap
            ):
                continue
            template = _template(cloudformation, name)
            listed = [
                r
                for r in cloudformation.list_stack_resources(StackName=name)["StackResourceSummaries"]
                if r.get("PhysicalResourceId")
            ]
            created = {r["LogicalResourceId"] for r in listed}
            conditions = template.get("Conditions", {})
            not_created = sorted(
                (logical, spec["Type"])
                for logical, spec in template.get("Resources", {}).items()
                if logical not in created and not (spec.get("Condition") and spec["Condition"] in conditions)
            )
            missing = []
            for r in listed:
                kind, physical = r["ResourceType"], r["PhysicalResourceId"]
                absent = _absent(emulator, kind, physical)
                if absent:
                    missing.append((r["LogicalResourceId"], kind, physical, absent))
            outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
            summaries.append(
                StackSummary(
                    name,
                    stack["StackStatus"],
                    len(created),
                    not_created,
                    outputs,
                    missing,
                    stack.get("StackStatusReason", ""),
                    _notes(cloudformation, name),
                )
            )
    return summaries
