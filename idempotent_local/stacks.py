"""Read deployed stacks back from the emulator (client side)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from idempotent_local.cdk import BOOTSTRAP_STACK
from idempotent_local.emulator import Emulator


@dataclass(frozen=True)
class StackSummary:
    name: str
    status: str
    resources: int
    not_created: list[tuple[str, str]]  # (logical id, type) in the template but not in the emulator
    outputs: dict[str, str] = field(default_factory=dict)


def deployed_stacks(emulator: Emulator, *, include_bootstrap: bool = False) -> list[StackSummary]:
    """Every live stack, with the template resources the emulator did not create (should be none)."""
    cloudformation = emulator.client("cloudformation")
    summaries = []
    for page in cloudformation.get_paginator("describe_stacks").paginate():
        for stack in page["Stacks"]:
            name = stack["StackName"]
            if stack["StackStatus"] == "DELETE_COMPLETE" or (
                name == BOOTSTRAP_STACK and not include_bootstrap
            ):
                continue
            body = cloudformation.get_template(StackName=name)["TemplateBody"]
            try:
                template = json.loads(body) if isinstance(body, str) else dict(body)
            except ValueError:
                template = {}  # a YAML template (the bootstrap stack's): not checked
            created = {
                r["LogicalResourceId"]
                for r in cloudformation.list_stack_resources(StackName=name)["StackResourceSummaries"]
                if r.get("PhysicalResourceId")
            }
            wanted = template.get("Resources", {})
            conditions = template.get("Conditions", {})
            not_created = sorted(
                (logical, spec["Type"])
                for logical, spec in wanted.items()
                if logical not in created and not (spec.get("Condition") and spec["Condition"] in conditions)
            )
            outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
            summaries.append(StackSummary(name, stack["StackStatus"], len(created), not_created, outputs))
    return summaries
