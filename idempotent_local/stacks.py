"""Read deployed stacks back from the emulator (client side), and check that what they list exists.

A resource of a type the emulator does not create (one moto does not know, or a custom resource) is left
out of the stack, and what refers to it is created without it. That is a note naming the resource and what
refers to it, unless a pipeline needs it: an event source mapping or SNS subscription refers to it, directly
or through what they refer to (the function, its role, its environment, the queue and its dead-letter
queue). Then it is a problem (exit code 1), naming the pipeline's resource that needs it.
"""

from __future__ import annotations

import concurrent.futures
import json
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from idempotent_local.cdk import BOOTSTRAP_STACK
from idempotent_local.emulator import Emulator
from idempotent_local.template import direct, needed_by

# The resources a pipeline starts from: what polls a queue or stream, and what delivers to a queue.
PIPELINE_ROOTS = ("AWS::Lambda::EventSourceMapping", "AWS::SNS::Subscription")


@dataclass(frozen=True)
class LeftOut:
    """A resource of the template the emulator did not create, and what refers to it."""

    logical_id: str
    kind: str
    referred_by: tuple[str, ...] = ()  # logical ids of the resources that refer to it
    pipeline_needs: tuple[str, str] | None = None  # (logical id, type) of a pipeline resource needing it

    @property
    def why(self) -> str:
        if self.kind.startswith("Custom::") or self.kind == "AWS::CloudFormation::CustomResource":
            return "the emulator does not run custom resources (their provider runs during a deploy)"
        return "the emulator does not know this type"

    def describe(self) -> str:
        text = f"{self.logical_id} ({self.kind}) was not created: {self.why}"
        if self.pipeline_needs is not None:
            who, kind = self.pipeline_needs
            return f"{text}; the pipeline's {who} ({kind}) refers to it and was created without it"
        if self.referred_by:
            text += (
                f"; {', '.join(self.referred_by)} {'refers' if len(self.referred_by) == 1 else 'refer'} to it"
            )
        return text


@dataclass(frozen=True)
class StackSummary:
    name: str
    status: str
    resources: int
    not_created: list[LeftOut]  # in the template but not in the emulator
    outputs: dict[str, str] = field(default_factory=dict)
    # (logical id, type, physical id, what does not exist: the resource or one it needs)
    missing: list[tuple[str, str, str, str]] = field(default_factory=list)
    status_reason: str = ""
    events: list[str] = field(default_factory=list)  # what the emulator did not model in the last update

    def problems(self) -> list[str]:
        """One sentence per resource that does not exist in the emulator and a pipeline needs, or that the
        stack lists."""
        return [left.describe() for left in self.not_created if left.pipeline_needs is not None] + [
            f"{logical} ({kind}) is in the stack as {physical}, but {absent} does not exist in the emulator"
            for logical, kind, physical, absent in self.missing
        ]

    @property
    def notes(self) -> list[str]:
        """What the emulator left out that no pipeline needs, and what it did not model in the last update."""
        return [left.describe() for left in self.not_created if left.pipeline_needs is None] + self.events


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> list[Any]:
    return [item for page in client.get_paginator(operation).paginate(**kwargs) for item in page.get(key, [])]


class Inventory:
    """What exists in the emulator (its control API's inventory, one request), to check every resource the
    stacks list against. Types it does not list are not checked."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        self._listed: dict[str, Any] | None = None

    def _of(self, kind: str) -> Any:
        if self._listed is None:
            self._listed = self.emulator.control.inventory()
        return self._listed.get(kind)

    def absent(self, kind: str, physical: str) -> str | None:
        """What of this resource does not exist in the emulator (itself, or one it needs), or None."""
        listed = self._of(kind)
        if listed is None:
            return None
        if kind == "AWS::SQS::Queue":
            return None if physical.rsplit("/", 1)[-1] in listed else physical
        if kind == "AWS::KMS::Key":
            state = listed.get(physical.rsplit("/", 1)[-1])
            if state is None:
                return physical
            return f"{physical} ({state})" if state in ("PendingDeletion", "PendingReplicaDeletion") else None
        if kind == "AWS::Lambda::EventSourceMapping":
            return self._mapping(listed, physical)
        return None if physical in listed else physical

    def mappings(self) -> list[dict[str, Any]]:
        """Every event source mapping's configuration, as ``ListEventSourceMappings`` gives it."""
        return list(self._of("AWS::Lambda::EventSourceMapping").values())

    def _mapping(self, mappings: dict[str, dict[str, Any]], physical: str) -> str | None:
        if physical not in mappings:
            return physical
        source = mappings[physical]["EventSourceArn"]
        service = source.split(":")[2]
        if service == "sqs" and source.rsplit(":", 1)[-1] not in self._of("AWS::SQS::Queue"):
            return f"the queue it reads, {source},"
        if service == "dynamodb" and source not in self._of("streams"):  # a closed one is kept 24 hours
            return f"the stream it reads, {source},"
        return None


def _template(cloudformation: Any, name: str) -> dict[str, Any]:
    body = cloudformation.get_template(StackName=name)["TemplateBody"]
    try:
        return json.loads(body) if isinstance(body, str) else dict(body)
    except ValueError:
        return {}  # a YAML template (the bootstrap stack's): not checked


def left_out(resources: dict[str, Any], created: set[str], conditions: dict[str, Any]) -> list[LeftOut]:
    """The template's resources that were not created (a resource whose condition may be false aside), each
    with what refers to it and the pipeline resource that needs it, if one does."""
    absent = sorted(
        logical
        for logical, spec in resources.items()
        if logical not in created and not (spec.get("Condition") and spec["Condition"] in conditions)
    )
    if not absent:
        return []
    roots = {logical for logical, spec in resources.items() if spec.get("Type") in PIPELINE_ROOTS}
    pipeline = needed_by(resources, roots)
    found = []
    for logical in absent:
        referring = tuple(sorted(r for r, spec in resources.items() if logical in direct(spec)))
        needing = next((r for r in referring if r in pipeline), None)
        if needing is None and logical in roots:
            needing = logical  # a pipeline's own mapping or subscription
        kind = resources[logical].get("Type", "")
        needs = (needing, resources[needing].get("Type", "")) if needing is not None else None
        found.append(LeftOut(logical, kind, referring, needs))
    return found


def stack_outputs(emulator: Emulator, stack: str | None = None) -> dict[str, dict[str, str]]:
    """Each live stack's outputs by stack name (the bootstrap stack's aside), from ``DescribeStacks`` alone:
    what ``local output`` needs, in one request whatever the stacks hold. ``stack`` names one (a stack that
    does not exist is left out)."""
    try:
        stacks = _live(emulator, stack)
    except ClientError:
        return {}  # no such stack
    return {s["StackName"]: {o["OutputKey"]: o["OutputValue"] for o in s.get("Outputs", [])} for s in stacks}


def _live(emulator: Emulator, stack: str | None = None, include_bootstrap: bool = False) -> list[Any]:
    """The stacks ``DescribeStacks`` lists (``stack``: that one) that are not deleted."""
    named = {"StackName": stack} if stack else {}
    return [
        s
        for s in _pages(emulator.client("cloudformation"), "describe_stacks", "Stacks", **named)
        if s["StackStatus"] != "DELETE_COMPLETE" and (include_bootstrap or s["StackName"] != BOOTSTRAP_STACK)
    ]


def deployed_stacks(
    emulator: Emulator, *, include_bootstrap: bool = False, inventory: Inventory | None = None
) -> list[StackSummary]:
    """Every live stack, with the template resources the emulator did not create and the listed resources
    that do not exist in it (both should be none). The stacks are read at the same time (the emulator
    serves requests on many threads), and their resources checked against one inventory."""
    stacks = _live(emulator, include_bootstrap=include_bootstrap)
    inventory = inventory or Inventory(emulator)
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        listing = pool.submit(inventory._of, "")  # the inventory, while the stacks are read
        summaries = list(pool.map(lambda stack: _summary(emulator, stack, inventory, listing), stacks))
    return summaries


def _summary(emulator: Emulator, stack: dict[str, Any], inventory: Inventory, listing: Any) -> StackSummary:
    cloudformation, name = emulator.client("cloudformation"), stack["StackName"]
    template = _template(cloudformation, name)
    listed = [
        r
        for r in _pages(cloudformation, "list_stack_resources", "StackResourceSummaries", StackName=name)
        if r.get("PhysicalResourceId")
    ]
    created = {r["LogicalResourceId"] for r in listed}
    listing.result()
    notes = inventory._of("notes").get(name, [])
    missing = []
    for r in listed:
        kind, physical = r["ResourceType"], r["PhysicalResourceId"]
        absent = inventory.absent(kind, physical)
        if absent:
            missing.append((r["LogicalResourceId"], kind, physical, absent))
    return StackSummary(
        name,
        stack["StackStatus"],
        len(created),
        left_out(template.get("Resources", {}), created, template.get("Conditions", {})),
        {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
        missing,
        stack.get("StackStatusReason", ""),
        notes,
    )
