"""``AWS::ApiGateway::Account``: moto 5.2.5 does not know the type (every CDK ``RestApi`` has one unless the
app sets ``@aws-cdk/aws-apigateway:disableCloudWatchRole``)."""

from __future__ import annotations

from typing import Any

from moto.apigateway.models import apigateway_backends
from moto.core.common_models import CloudFormationModel

from idempotent_local.cloudformation._common import StackResource, StateOnlyType


def _set_role(role_arn: str | None, account_id: str, region_name: str) -> None:
    apigateway_backends[account_id][region_name].account.cloudwatch_role_arn = role_arn


def _unset_role(resolved: dict[str, Any], _: str, account_id: str, region_name: str) -> None:
    _set_role(None, account_id, region_name)


class ApiGatewayAccount(StateOnlyType, CloudFormationModel):
    """``AWS::ApiGateway::Account``: the region's API Gateway setting of the role that writes API logs to
    CloudWatch Logs (``GetAccount``'s ``cloudwatchRoleArn``), set on create and update, unset with the
    resource. The emulator writes no API logs."""

    TYPE = "AWS::ApiGateway::Account"
    GET_ATT = {"Id": "physical_id"}

    @classmethod
    def create(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
        _set_role(props.get("CloudWatchRoleArn"), account_id, region_name)
        return StackResource(name, props, _unset_role, {"Id": name})

    @classmethod
    def update(
        cls, resource: StackResource, props: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        _set_role(props.get("CloudWatchRoleArn"), account_id, region_name)
