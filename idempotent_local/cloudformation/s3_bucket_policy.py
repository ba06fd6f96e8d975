"""``AWS::S3::BucketPolicy``: moto 5.2.5 does not know the type (a bucket with ``enforce_ssl`` has one)."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.s3.models import s3_backends
from moto.utilities.utils import get_partition

from idempotent_local.cloudformation._common import StackResource, StateOnlyType


def _set_policy(bucket: str, document: Any, account_id: str, region_name: str) -> None:
    backend = s3_backends[account_id][get_partition(region_name)]
    text = document if isinstance(document, str) else json.dumps(document)
    backend.put_bucket_policy(bucket, text.encode())


def _remove_policy(resolved: dict[str, Any], _: str, account_id: str, region_name: str) -> None:
    backend = s3_backends[account_id][get_partition(region_name)]
    if resolved.get("Bucket") in backend.buckets:  # a bucket deleted first takes its policy with it
        backend.delete_bucket_policy(resolved["Bucket"])


class S3BucketPolicy(StateOnlyType, CloudFormationModel):
    """``AWS::S3::BucketPolicy``: the bucket's policy (``GetBucketPolicy``), set on create and update and
    removed with the resource; another ``Bucket`` replaces it (see ``_updates``)."""

    TYPE = "AWS::S3::BucketPolicy"
    GET_ATT: dict[str, str] = {}  # none in AWS (its Ref is the bucket's name)

    @classmethod
    def create(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
        _set_policy(props["Bucket"], props["PolicyDocument"], account_id, region_name)
        return StackResource(props["Bucket"], props, _remove_policy)

    @classmethod
    def update(
        cls, resource: StackResource, props: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        _set_policy(props["Bucket"], props["PolicyDocument"], account_id, region_name)
