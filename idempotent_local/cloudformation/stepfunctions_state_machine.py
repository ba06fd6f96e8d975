"""``AWS::StepFunctions::StateMachine``: moto 5.2.5 creates every state machine of a template as STANDARD,
ignoring ``StateMachineType``."""

from __future__ import annotations

from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.stepfunctions.models import StateMachine as MotoStateMachine
from moto.stepfunctions.models import stepfunctions_backends
from moto.stepfunctions.utils import cfn_to_api_tags

from idempotent_local.cloudformation._common import adopt, properties


class StepFunctionsStateMachine(MotoStateMachine, CloudFormationModel):
    """``AWS::StepFunctions::StateMachine``: a moto state machine of the template's type (STANDARD unless
    ``StateMachineType`` says EXPRESS), so what refuses an Express workflow in AWS refuses it here. Updates
    and deletion are moto's; a new type replaces it (see ``_updates``)."""

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> StepFunctionsStateMachine:
        props = properties(cloudformation_json)
        machine = stepfunctions_backends[account_id][region_name].create_state_machine(
            props.get("StateMachineName", resource_name),
            props.get("DefinitionString", ""),
            props.get("RoleArn", ""),
            tags=cfn_to_api_tags(props.get("Tags") or []),
            sm_type=props.get("StateMachineType"),
        )
        return adopt(machine, cls)
