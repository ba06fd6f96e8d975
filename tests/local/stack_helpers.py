"""Deploy hand-written CloudFormation templates into the emulator and read the stack back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from idempotent_runtime.relay import RELAY_HANDLER

from idempotent_cli.main import main as cli_main
from idempotent_local import emulator as emulators
from idempotent_local.emulator import Emulator

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = "IdempotentPipeline"  # the reference app's stack (app.py)


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


def local_deploy(state_dir: Path, output: Path, *context: str, app: Path = ROOT, demo: bool = False) -> int:
    """``idempotent-pipeline local deploy`` of ``app`` (the reference app unless named) with ``-c``
    ``context`` into the emulator of ``state_dir``, the cloud assembly in ``output``; its exit code."""
    options = ["--state-dir", str(state_dir), "--app-dir", str(app), "--output", str(output)]
    contexts = [word for pair in context for word in ("-c", pair)]
    return cli_main(["local", "deploy", *options, *contexts, *(["--demo"] if demo else [])])


def deploy_reference(state_dir: Path, output: Path, *context: str) -> tuple[Emulator, dict[str, str]]:
    """The reference app deployed by ``local deploy`` (the real CDK CLI) with ``-c`` ``context`` into the
    emulator of ``state_dir``, reset first (other tests leave resources behind); the emulator and the stack's
    outputs."""
    emulator, _ = emulators.start(state_dir)
    emulator.reset()
    assert local_deploy(state_dir, output, *context) == 0
    return emulator, outputs(emulator, REFERENCE)


def outputs(emulator: Emulator, stack: str) -> dict[str, str]:
    described = emulator.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


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


def relays(emulator: Emulator) -> dict[str, dict[str, Any]]:
    """The outbox relay functions, by the table whose stream feeds them: {"function", "mapping"}."""
    client = emulator.client("lambda")
    found = {}
    for function in client.list_functions()["Functions"]:
        if function["Handler"] != RELAY_HANDLER:
            continue
        (mapping,) = client.list_event_source_mappings(FunctionName=function["FunctionName"])[
            "EventSourceMappings"
        ]
        table = mapping["EventSourceArn"].split(":table/")[1].split("/stream/")[0]
        found[table] = {"function": function, "mapping": mapping}
    return found


def relay_of(emulator: Emulator, table: str) -> str:
    """The name of the relay that reads ``table``'s stream."""
    return str(relays(emulator)[table]["function"]["FunctionName"])


def paid_and_shipped(emulator: Emulator, outputs: dict[str, str]) -> tuple[list[tuple[str, str]], list[int]]:
    """What the reference app's later hops stored: payments as (partition key, cents), sorted, and the
    shipments' paid cents, sorted."""
    dynamodb = emulator.client("dynamodb")

    def items(table: str) -> list[dict[str, Any]]:
        return dynamodb.scan(TableName=outputs[table], ConsistentRead=True)["Items"]

    payments = sorted(
        (i["pk"]["S"], i["cents"]["N"])
        for i in items("PaymentsTableName")
        if i["pk"]["S"].startswith("payment#")
    )
    shipments = sorted(int(i["paid_cents"]["N"]) for i in items("ShippingTableName") if "paid_cents" in i)
    return payments, shipments
