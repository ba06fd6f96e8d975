"""CloudFormation resource types the emulator is taught, so a CDK template deploys *wired*.

Moto 5.2.5's CloudFormation skips types a pipeline needs (subscriptions, queue and topic policies, alarms),
does not know types an ordinary app holds beside one (bucket policies, secrets, REST API stages), and gets
others wrong (each module's docstring says how: names, in-place updates, attributes). Each type is a moto
``CloudFormationModel`` that does what CloudFormation does, through moto's own backends, so the deployed
template stays the single source of truth: nothing is created beside it. A type moto has a model for is its
model adopted by a taught class (one module per type, on ``_common.Taught``); the types that live only as
stack state share one shape and are declared as data, a row each (``stack_types``). Each declares exactly
the ``Fn::GetAtt`` attributes AWS has. How a stack is updated (order, replacement, rollback) is in
``_updates``; what a template must not do, in ``_validation``.

Moto finds CloudFormation types through ``CloudFormationModel.__subclasses__()``; a later class for the same
type wins. Importing this package defines the classes; :func:`teach` clears moto's type caches so they take
over, and checks that they did: the emulator's service :data:`SERVICE`. Behaviour that is not a resource
type is changed by the named patches of :mod:`idempotent_local.patches`.
"""

from __future__ import annotations

from idempotent_local.extra import require_moto

require_moto()

# ruff: noqa: E402 (moto is imported once the check above has explained what is missing)
from moto.cloudformation import parsing
from moto.core.common_models import CloudFormationModel

from idempotent_local.cloudformation.dynamodb_table import DynamoDbTable
from idempotent_local.cloudformation.kms_key import KmsKey
from idempotent_local.cloudformation.lambda_event_source_mapping import LambdaEventSourceMapping
from idempotent_local.cloudformation.lambda_version import LambdaVersion
from idempotent_local.cloudformation.sns_topic import SnsTopic
from idempotent_local.cloudformation.sqs_queue import SqsQueue
from idempotent_local.cloudformation.stack_types import MODELS
from idempotent_local.cloudformation.stepfunctions_state_machine import StepFunctionsStateMachine
from idempotent_local.emulator import Service

TAUGHT: dict[str, type[CloudFormationModel]] = {
    **{
        model.cloudformation_type(): model
        for model in (
            SnsTopic,
            SqsQueue,
            DynamoDbTable,
            KmsKey,
            LambdaEventSourceMapping,
            LambdaVersion,
            StepFunctionsStateMachine,
        )
    },
    **MODELS,
}


def teach() -> None:
    """Make this process's moto use the taught types (moto's type caches are cleared, then checked)."""
    parsing.get_model_list.cache_clear()
    parsing.get_model_map.cache_clear()
    parsing.get_name_type_map.cache_clear()
    model_map = parsing.get_model_map()
    for type_name, model in TAUGHT.items():
        if model_map.get(type_name) is not model:
            raise RuntimeError(
                f"cloudformation type {type_name} is not taught: found {model_map.get(type_name)}"
            )


SERVICE = Service("CloudFormation types", lambda endpoint: teach())

__all__ = ["SERVICE", "TAUGHT", "teach"]
