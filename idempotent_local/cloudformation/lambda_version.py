"""``AWS::Lambda::Version``: moto 5.2.5 publishes the version but answers ``Ref`` with its Python object and
has no ``Fn::GetAtt``, so nothing can name the version (a durable function is invoked by one)."""

from __future__ import annotations

from typing import Any

from moto.awslambda.models import LambdaVersion as MotoLambdaVersion
from moto.awslambda.models import lambda_backends
from moto.core.common_models import CloudFormationModel

from idempotent_local.cloudformation._common import Taught


class LambdaVersion(Taught, MotoLambdaVersion, CloudFormationModel):
    """``AWS::Lambda::Version``: a published version whose ``Ref`` is its ARN
    (``arn:...:function:NAME:VERSION``), with AWS's ``Fn::GetAtt`` attributes ``Version`` and
    ``FunctionArn``. Deletion keeps the version, as moto does (AWS deletes it)."""

    TYPE = "AWS::Lambda::Version"
    GET_ATT = {"Version": "version", "FunctionArn": "function_arn"}

    def __init__(self, version: str, function_arn: str) -> None:
        super().__init__({"Version": version})
        self.function_arn = function_arn

    @property
    def physical_resource_id(self) -> str:
        return self.function_arn

    # Moto cannot update a version: an update keeps it (see _updates), as moto's own class does.
    update_from_cloudformation_json = CloudFormationModel.update_from_cloudformation_json

    @classmethod
    def create_resource(
        cls, name: str, props: dict[str, Any], account_id: str, region_name: str
    ) -> LambdaVersion:
        backend = lambda_backends[account_id][region_name]
        published = backend.publish_version(props["FunctionName"])
        assert published is not None, props["FunctionName"]
        unqualified = backend.get_function(published.function_name).function_arn
        return cls(str(published.version), f"{unqualified}:{published.version}")
