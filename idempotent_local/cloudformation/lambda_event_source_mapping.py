"""``AWS::Lambda::EventSourceMapping``: moto 5.2.5 updates a mapping with the properties the template sets
and keeps those it dropped (a removed ``FilterCriteria`` keeps filtering, a removed ``DestinationConfig``
keeps its destination), and takes ``"false"`` for enabled."""

from __future__ import annotations

from typing import Any

from moto.awslambda.models import EventSourceMapping
from moto.awslambda.utils import get_backend
from moto.core.common_models import CloudFormationModel

from idempotent_local.cloudformation._common import Taught, adopt, as_bool

# The template's updatable properties, by the name UpdateEventSourceMapping gives them. A property the
# template does not set goes back to Lambda's default: None (moto's default BatchSize, nothing else set),
# or as listed in DEFAULTS.
UPDATABLE = {
    "BatchSize": "BatchSize",
    "BisectBatchOnFunctionError": "BisectBatchOnFunctionError",
    "DestinationConfig": "DestinationConfig",
    "DocumentDBEventSourceConfig": "DocumentDBEventSourceConfig",
    "Enabled": "Enabled",
    "FilterCriteria": "FilterCriteria",
    "FunctionName": "FunctionName",
    "FunctionResponseTypes": "FunctionResponseTypes",
    "KmsKeyArn": "KMSKeyArn",
    "MaximumBatchingWindowInSeconds": "MaximumBatchingWindowInSeconds",
    "MaximumRecordAgeInSeconds": "MaximumRecordAgeInSeconds",
    "MaximumRetryAttempts": "MaximumRetryAttempts",
    "MetricsConfig": "MetricsConfig",
    "ParallelizationFactor": "ParallelizationFactor",
    "ProvisionedPollerConfig": "ProvisionedPollerConfig",
    "ScalingConfig": "ScalingConfig",
    "SourceAccessConfigurations": "SourceAccessConfigurations",
    "TumblingWindowInSeconds": "TumblingWindowInSeconds",
}
DEFAULTS: dict[str, Any] = {"Enabled": True}
BOOLEANS = ("Enabled", "BisectBatchOnFunctionError")


def _spec(props: dict[str, Any]) -> dict[str, Any]:
    """``props`` with CloudFormation's booleans (``true`` or ``"true"``) as booleans."""
    return {name: as_bool(value) if name in BOOLEANS else value for name, value in props.items()}


class LambdaEventSourceMapping(Taught, EventSourceMapping, CloudFormationModel):
    """``AWS::Lambda::EventSourceMapping``: moto's mapping, updated to exactly what the template says."""

    TYPE = "AWS::Lambda::EventSourceMapping"  # its Fn::GetAtt attributes: moto's

    @classmethod
    def create_resource(
        cls, name: str, props: dict[str, Any], account_id: str, region_name: str
    ) -> LambdaEventSourceMapping:
        return adopt(get_backend(account_id, region_name).create_event_source_mapping(_spec(props)), cls)

    @classmethod
    def update_resource(
        cls, mapping: LambdaEventSourceMapping, props: dict[str, Any], account_id: str, region_name: str
    ) -> LambdaEventSourceMapping:
        """In place (a change of the source or the starting position replaces it: see ``_updates``)."""
        props = _spec(props)
        spec = {api: props.get(name, DEFAULTS.get(name)) for name, api in UPDATABLE.items()}
        if spec["FunctionName"] is None:
            del spec["FunctionName"]  # required by the template; moto's own error if it is missing
        get_backend(account_id, region_name).update_event_source_mapping(mapping.uuid, spec)
        return mapping
