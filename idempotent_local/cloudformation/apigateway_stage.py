"""``AWS::ApiGateway::Stage``: moto 5.2.5 does not know the type (every CDK ``RestApi`` has one)."""

from __future__ import annotations

from typing import Any

from moto.apigateway.models import apigateway_backends
from moto.core.common_models import CloudFormationModel

from idempotent_local.cloudformation._common import StackResource, StateOnlyType, tags


def _delete(resolved: dict[str, Any], name: str, account_id: str, region_name: str) -> None:
    backend = apigateway_backends[account_id][region_name]
    api = backend.apis.get(resolved.get("RestApiId", ""))
    if api is not None:  # an API deleted first takes its stages with it
        api.stages.pop(name, None)


class ApiGatewayStage(StateOnlyType, CloudFormationModel):
    """``AWS::ApiGateway::Stage``: the REST API's stage (``GetStage``), pointing at the template's
    deployment; ``Ref`` is the stage name. Another ``StageName`` or ``RestApiId`` replaces it (see
    ``_updates``); the rest is updated in place."""

    TYPE = "AWS::ApiGateway::Stage"
    NAME = "StageName"

    @classmethod
    def create(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
        name = props.get("StageName", name)
        apigateway_backends[account_id][region_name].create_stage(
            props["RestApiId"],
            name,
            props.get("DeploymentId", ""),
            variables=props.get("Variables") or {},
            description=props.get("Description", ""),
            cacheClusterEnabled=props.get("CacheClusterEnabled"),
            cacheClusterSize=props.get("CacheClusterSize"),
            tags=tags(props) or None,
            tracing_enabled=props.get("TracingEnabled"),
        )
        return StackResource(name, props, _delete)

    @classmethod
    def update(
        cls, resource: StackResource, props: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        stage = apigateway_backends[account_id][region_name].get_stage(
            props["RestApiId"], resource.physical_id
        )
        stage.deployment_id = props.get("DeploymentId", "")
        stage.variables = props.get("Variables") or {}
        stage.description = props.get("Description", "")
        stage.tracing_enabled = props.get("TracingEnabled")
