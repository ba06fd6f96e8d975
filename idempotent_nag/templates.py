"""The synthesized templates of an app, and the references between their resources.

The rules read what CloudFormation receives: the templates CDK wrote (escape-hatch overrides included), one
read per stack, plain dictionaries from then on. A reference is followed when it names a resource of the app:
``Ref`` and ``Fn::GetAtt`` within a stack; another stack's output, through ``Fn::ImportValue`` of its export
(CDK's strong cross-stack references) or ``Fn::GetStackOutput`` (weak ones). Anything else (a literal ARN, a
parameter, an import from outside the app) names nothing here, and the rules that need it skip.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from idempotent_pipeline._rules import TOKEN

QUEUE = "AWS::SQS::Queue"
FUNCTION = "AWS::Lambda::Function"
MAPPING = "AWS::Lambda::EventSourceMapping"
TOPIC = "AWS::SNS::Topic"
SUBSCRIPTION = "AWS::SNS::Subscription"
ALARM = "AWS::CloudWatch::Alarm"
KEY = "AWS::KMS::Key"
TABLE = "AWS::DynamoDB::Table"
INVOKE_CONFIG = "AWS::Lambda::EventInvokeConfig"


@dataclass(frozen=True, eq=False)  # one object per resource: compared and hashed by identity
class Resource:
    stack: str  # the construct path of its stack
    id: str  # its logical id
    type: str
    properties: Mapping[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        return self.properties.get(name, default)


class Templates:
    """The resources and outputs of an app's stacks: construct path -> template, and -> stack name."""

    def __init__(self, templates: Mapping[str, Mapping[str, Any]], names: Mapping[str, str]) -> None:
        self.resources = {
            (stack, id): Resource(stack, id, resource["Type"], resource.get("Properties") or {})
            for stack, template in templates.items()
            for id, resource in (template.get("Resources") or {}).items()
        }
        outputs = [
            (stack, name, output)
            for stack, template in templates.items()
            for name, output in (template.get("Outputs") or {}).items()
        ]
        self.outputs = {(names.get(stack), name): (stack, o.get("Value")) for stack, name, o in outputs}
        self.exports = {
            o["Export"]["Name"]: (stack, o.get("Value"))
            for stack, _, o in outputs
            if isinstance(o.get("Export", {}).get("Name"), str)
        }

    @classmethod
    def read(cls, stacks: Iterable[tuple[str, str, str]]) -> Templates:
        """From (construct path, stack name, template file) of each stack."""
        stacks = list(stacks)
        templates = {stack: json.loads(Path(file).read_text()) for stack, _, file in stacks}
        return cls(templates, {stack: name for stack, name, _ in stacks})

    def of_type(self, type_: str) -> list[Resource]:
        return [resource for resource in self.resources.values() if resource.type == type_]

    def target(self, stack: str, value: Any, type_: str) -> Resource | None:
        """The resource of type ``type_`` that ``value``, written in ``stack``'s template, refers to."""
        if isinstance(value, dict) and isinstance(value.get("Fn::ImportValue"), str):
            stack, value = self.exports.get(value["Fn::ImportValue"], (stack, None))
        elif isinstance(value, dict) and isinstance(value.get("Fn::GetStackOutput"), dict):
            output = value["Fn::GetStackOutput"]
            stack, value = self.outputs.get(
                (output.get("StackName"), output.get("OutputName")), (stack, None)
            )
        name, attribute = None, None
        if isinstance(value, dict):
            name, attribute = value.get("Ref"), value.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute:
            name = attribute[0]
        elif isinstance(attribute, str):
            name = attribute.split(".")[0]
        found = self.resources.get((stack, name)) if isinstance(name, str) else None
        return found if found is not None and found.type == type_ else None


def number(value: Any) -> int | None:
    """A whole number written in a template (CloudFormation also accepts one as text); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value) else None


def known(value: Any, default: Any) -> Any:
    """A number from a template: ``default`` when it is not set, TOKEN when the template cannot say (a
    parameter, a reference)."""
    if value is None:
        return default
    found = number(value)
    return TOKEN if found is None else found


def flag(value: Any, default: bool = False) -> Any:
    """A boolean from a template (also as text): ``default`` when it is not set, TOKEN when the template
    cannot say."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return TOKEN


def listed(value: Any) -> list[Any]:
    """A policy element that may be one value or a list of them."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def document(value: Any) -> Mapping[str, Any]:
    """A JSON object property, which CloudFormation also accepts as JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}
