"""The synthesized templates of an app, and the references between their resources.

The rules read what CloudFormation receives: the templates CDK wrote (escape-hatch overrides included), one
read per stack, plain dictionaries from then on. A reference is followed when it names a resource of the app:
``Ref`` and ``Fn::GetAtt`` within a stack; another stack's output, through ``Fn::ImportValue`` of its export
(CDK's strong cross-stack references) or ``Fn::GetStackOutput`` (weak ones); inside an ARN or a name joined
from parts (``Fn::Join``, ``Fn::Select``, ``Fn::Split``, ``Fn::Sub``), as CDK writes an alias's or a version's
function name. Anything else (a literal ARN, a parameter, an import from outside the app) names nothing
here, and the rules that need it skip.
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
ALIAS, VERSION = "AWS::Lambda::Alias", "AWS::Lambda::Version"
PIPE = "AWS::Pipes::Pipe"
RULE = "AWS::Events::Rule"
ROLE = "AWS::IAM::Role"
# Intrinsic functions that build an ARN or a name from the references inside them.
JOINED = ("Fn::Join", "Fn::Select", "Fn::Split", "Fn::Sub")


@dataclass(frozen=True, eq=False)  # one object per resource: compared and hashed by identity
class Resource:
    stack: str  # the construct path of its stack
    id: str  # its logical id
    type: str
    properties: Mapping[str, Any]
    path: str  # its construct path (aws:cdk:path), or the stack's and its logical id

    def get(self, name: str, default: Any = None) -> Any:
        return self.properties.get(name, default)


class Templates:
    """The resources and outputs of an app's stacks: construct path -> template, and -> stack name."""

    def __init__(self, templates: Mapping[str, Mapping[str, Any]], names: Mapping[str, str]) -> None:
        self.resources = {
            (stack, id): Resource(
                stack,
                id,
                resource["Type"],
                resource.get("Properties") or {},
                (resource.get("Metadata") or {}).get("aws:cdk:path") or f"{stack}/{id}",
            )
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
        """The resource of type ``type_`` that ``value``, written in ``stack``'s template, refers to (None:
        none, or more than one)."""
        found = {resource for resource in self.referred(stack, value) if resource.type == type_}
        return found.pop() if len(found) == 1 else None

    def function(self, stack: str, value: Any) -> Resource | None:
        """The function that ``value`` (a FunctionName, an ARN) names: itself, or through a version or an
        alias of it. Every rule that follows a reference to a function follows it here."""
        found = {self._unqualified(resource) for resource in self.referred(stack, value)} - {None}
        return found.pop() if len(found) == 1 else None

    def _unqualified(self, resource: Resource) -> Resource | None:
        if resource.type in (ALIAS, VERSION):
            return self.target(resource.stack, resource.get("FunctionName"), FUNCTION)
        return resource if resource.type == FUNCTION else None

    def referred(self, stack: str, value: Any) -> list[Resource]:
        """The resources of the app that ``value``, written in ``stack``'s template, refers to."""
        if isinstance(value, list):
            return [found for item in value for found in self.referred(stack, item)]
        if not isinstance(value, dict) or len(value) != 1:
            return []
        ((function, argument),) = value.items()
        if function == "Fn::ImportValue" and isinstance(argument, str):
            return self.referred(*self.exports.get(argument, (stack, None)))
        if function == "Fn::GetStackOutput" and isinstance(argument, dict):
            output = (argument.get("StackName"), argument.get("OutputName"))
            return self.referred(*self.outputs.get(output, (stack, None)))
        if function in JOINED:  # Fn::Sub's names in its text form: ${Name} or ${Name.Attribute}
            names = re.findall(r"\$\{([^!}][^}.]*)", argument) if isinstance(argument, str) else []
            return [*self.referred(stack, argument), *self._named(stack, names)]
        if isinstance(argument, list) and argument:  # Fn::GetAtt [name, attribute]
            argument = argument[0]
        if function in ("Ref", "Fn::GetAtt") and isinstance(argument, str):
            return self._named(stack, [argument.split(".")[0]])
        return []

    def _named(self, stack: str, names: Iterable[str]) -> list[Resource]:
        return [self.resources[(stack, name)] for name in names if (stack, name) in self.resources]


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
