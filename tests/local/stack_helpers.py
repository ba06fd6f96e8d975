"""Deploy hand-written CloudFormation templates into the emulator and read the stack back."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from idempotent_local.emulator import Emulator


def deploy(emulator: Emulator, template: dict[str, Any] | str, stack: str = "Taught") -> dict[str, str]:
    """Create ``stack`` from ``template``, or update it; returns each resource's physical id by logical id."""
    body = template if isinstance(template, str) else json.dumps(template)
    cloudformation = emulator.client("cloudformation")
    try:
        cloudformation.describe_stacks(StackName=stack)
    except ClientError:
        cloudformation.create_stack(StackName=stack, TemplateBody=body)
    else:
        cloudformation.update_stack(StackName=stack, TemplateBody=body)
    return physical_ids(emulator, stack)


def physical_ids(emulator: Emulator, stack: str = "Taught") -> dict[str, str]:
    resources = emulator.client("cloudformation").list_stack_resources(StackName=stack)
    return {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources["StackResourceSummaries"]}


def status(emulator: Emulator, stack: str = "Taught") -> str:
    return emulator.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]


def failure_reasons(emulator: Emulator, stack: str = "Taught") -> dict[str, str]:
    """``ResourceStatusReason`` of every failed resource event, by logical id."""
    events = emulator.client("cloudformation").describe_stack_events(StackName=stack)["StackEvents"]
    return {
        e["LogicalResourceId"]: e.get("ResourceStatusReason", "")
        for e in events
        if e["ResourceStatus"].endswith("_FAILED")
    }


def queue_attributes(emulator: Emulator, url: str) -> dict[str, str]:
    return emulator.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
