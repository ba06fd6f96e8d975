"""``AWS::CDK::Metadata``: moto 5.2.5 skips it with a warning; CloudFormation stores it and does nothing."""

from __future__ import annotations

from moto.core.common_models import CloudFormationModel

from idempotent_local.cloudformation._common import StateOnlyType


class CdkMetadata(StateOnlyType, CloudFormationModel):
    """``AWS::CDK::Metadata``: CDK's usage record. Real CloudFormation stores it and does nothing."""

    TYPE = "AWS::CDK::Metadata"
