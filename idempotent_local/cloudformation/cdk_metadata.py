"""``AWS::CDK::Metadata``: moto 5.2.5 skips it with a warning; CloudFormation stores it and does nothing."""

from __future__ import annotations

from typing import Any

from moto.core.common_models import CloudFormationModel

from idempotent_local.cloudformation._common import StackResource, properties


class CdkMetadata(CloudFormationModel):
    """``AWS::CDK::Metadata``: CDK's usage record. Real CloudFormation stores it and does nothing."""

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CDK::Metadata"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> StackResource:
        return StackResource(resource_name, properties(cloudformation_json))

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: StackResource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> StackResource:
        original_resource.properties = properties(cloudformation_json)
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        return None
