"""``AWS::StepFunctions::StateMachine``: moto 5.2.5 creates every state machine of a template as STANDARD,
ignoring ``StateMachineType``, and drops ``LoggingConfiguration``, ``TracingConfiguration`` and
``EncryptionConfiguration`` (logging ``OFF``, tracing off, whatever the template says), on create and on
update."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.stepfunctions.models import StateMachine as MotoStateMachine
from moto.stepfunctions.models import stepfunctions_backends
from moto.stepfunctions.utils import cfn_to_api_tags

from idempotent_local.cloudformation._common import Taught, adopt

# Template property -> (the API's field, the service's value when the template has none).
CONFIGURATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "LoggingConfiguration": ("loggingConfiguration", {"level": "OFF", "includeExecutionData": False}),
    "TracingConfiguration": ("tracingConfiguration", {"enabled": False}),
    "EncryptionConfiguration": ("encryptionConfiguration", {"type": "AWS_OWNED_KEY"}),
}


def api_shape(value: Any) -> Any:
    """A template value in the API's shape: ``{"Level": "ALL"}`` -> ``{"level": "ALL"}``, at every depth."""
    if isinstance(value, dict):
        return {key[:1].lower() + key[1:]: api_shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [api_shape(item) for item in value]
    return value


def configurations(props: dict[str, Any]) -> dict[str, Any]:
    """Each configuration the state machine has: the template's, else the service's default."""
    return {
        field: api_shape(props[name]) if name in props else dict(default)
        for name, (field, default) in CONFIGURATIONS.items()
    }


def definition(props: dict[str, Any]) -> str:
    """``DefinitionString``, or ``Definition`` (the same as an object)."""
    if "Definition" in props and "DefinitionString" not in props:
        return json.dumps(props["Definition"])
    return str(props.get("DefinitionString", ""))


class StepFunctionsStateMachine(Taught, MotoStateMachine, CloudFormationModel):
    """``AWS::StepFunctions::StateMachine``: a moto state machine of the template's type (STANDARD unless
    ``StateMachineType`` says EXPRESS), so what refuses an Express workflow in AWS refuses it here, with the
    template's logging, tracing and encryption configurations (``DescribeStateMachine`` shows them). An
    update changes them in place (one the template drops goes back to the service's default); a new type
    or name replaces it (see ``_updates``). Deletion is moto's."""

    TYPE = "AWS::StepFunctions::StateMachine"  # its name property and Fn::GetAtt attributes: moto's

    @classmethod
    def create_resource(
        cls, name: str, props: dict[str, Any], account_id: str, region_name: str
    ) -> StepFunctionsStateMachine:
        machine = stepfunctions_backends[account_id][region_name].create_state_machine(
            props.get("StateMachineName", name),
            definition(props),
            props.get("RoleArn", ""),
            tags=cfn_to_api_tags(props.get("Tags") or []),
            sm_type=props.get("StateMachineType"),
            **configurations(props),
        )
        return adopt(machine, cls)

    @classmethod
    def update_resource(
        cls, machine: Any, props: dict[str, Any], account_id: str, region_name: str
    ) -> StepFunctionsStateMachine:
        backend = stepfunctions_backends[account_id][region_name]
        machine = backend.update_state_machine(
            machine.arn, definition=definition(props), role_arn=props.get("RoleArn")
        )
        machine.update(**configurations(props))
        backend.tagger.tag_resource(machine.arn, cfn_to_api_tags(props.get("Tags") or []))
        return adopt(machine, cls)

    @classmethod
    def delete_resource(cls, name: str, account_id: str, region_name: str) -> None:
        stepfunctions_backends[account_id][region_name].delete_state_machine(name)
