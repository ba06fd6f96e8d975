"""What CloudFormation refuses in a template before it changes anything, and moto 5.2.5 does not.

Moto resolves a ``Fn::GetAtt`` only when it needs the value: a template naming an attribute its resource
type does not have is created, and every later ``DescribeStacks`` that lists the stack fails while
resolving its outputs (HTTP 500 for every stack). CloudFormation answers the request with a
``ValidationError`` and creates nothing; so does :func:`check`, from each type's ``has_cfn_attr`` (the taught
types declare exactly the attributes AWS has). A cycle between resources is refused the same way.
"""

from __future__ import annotations

from typing import Any

from moto.cloudformation import parsing
from moto.cloudformation.exceptions import ValidationError
from moto.cloudformation.models import Stack

from idempotent_local.template import attribute_reads, cycle


def check(template: dict[str, Any]) -> None:
    """Raise moto's ``ValidationError``, worded as CloudFormation's, for what CloudFormation refuses."""
    resources = template.get("Resources") or {}
    if not isinstance(resources, dict):
        return
    for target, attribute in attribute_reads([resources, template.get("Outputs") or {}]):
        if target not in resources:
            raise ValidationError(
                message=f"Template error: instance of Fn::GetAtt references undefined resource {target}"
            )
        kind = resources[target].get("Type", "") if isinstance(resources[target], dict) else ""
        model = parsing.get_model_map().get(kind)  # a type moto does not know is skipped at deploy
        if isinstance(attribute, str) and model is not None and not model.has_cfn_attr(attribute):
            raise ValidationError(
                message=f"Template error: resource {target} does not support attribute type {attribute} "
                "in Fn::GetAtt"
            )
    found = cycle(resources)
    if found:
        raise ValidationError(message=f"Circular dependency between resources: [{', '.join(found)}]")


def checked(original: Any) -> Any:
    """A backend method taking ``template=`` (CreateStack, UpdateStack, CreateChangeSet) checked first."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        template = kwargs.get("template")
        if isinstance(template, str) and template:
            parsed = Stack.parse_template(template)
            if isinstance(parsed, dict):
                check(parsed)
        return original(self, *args, **kwargs)

    return method
