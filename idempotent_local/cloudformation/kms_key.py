"""``AWS::KMS::Key``: moto 5.2.5 keeps the key policy as a dict (``DescribeKey`` then fails with HTTP 500),
cannot update a key, deletes one at once where CloudFormation schedules its deletion, and lacks the
``KeyId`` attribute."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.kms.models import Key as MotoKey
from moto.kms.models import kms_backends

from idempotent_local.cloudformation._common import Taught, adopt, as_bool

# Properties a key keeps for life: CloudFormation fails an update that changes one (it never replaces a key).
IMMUTABLE = ("KeySpec", "KeyUsage", "MultiRegion", "Origin")
DEFAULT_PENDING_WINDOW_DAYS = 30


class KmsKey(Taught, MotoKey, CloudFormationModel):
    """``AWS::KMS::Key``: a moto key with its policy as JSON text, updated in place, and scheduled for
    deletion (``PendingWindowInDays``, 30 by default) when the stack drops it."""

    TYPE, NAME = "AWS::KMS::Key", ""
    GET_ATT = {"Arn": "arn", "KeyId": "id"}  # exactly AWS's

    cfn_properties: dict[str, Any]  # the template's properties it was last deployed with

    @staticmethod
    def _apply(key: MotoKey, props: dict[str, Any], account_id: str, region_name: str) -> None:
        backend = kms_backends[account_id][region_name]
        policy = props.get("KeyPolicy") or key.generate_default_policy()  # KMS's default key policy
        backend.put_key_policy(key.id, json.dumps(policy) if isinstance(policy, dict) else str(policy))
        backend.update_key_description(key.id, props.get("Description", ""))
        rotated = as_bool(props.get("EnableKeyRotation", False))
        (backend.enable_key_rotation if rotated else backend.disable_key_rotation)(key.id)
        (backend.enable_key if as_bool(props.get("Enabled", True)) else backend.disable_key)(key.id)

    @classmethod
    def create_resource(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> KmsKey:
        key = kms_backends[account_id][region_name].create_key(
            policy=None,
            key_usage=props.get("KeyUsage", "ENCRYPT_DECRYPT"),
            key_spec=props.get("KeySpec", "SYMMETRIC_DEFAULT"),
            description=props.get("Description", ""),
            tags=props.get("Tags", []),
            multi_region=as_bool(props.get("MultiRegion", False)),
        )
        cls._apply(key, props, account_id, region_name)
        key = adopt(key, cls)
        key.cfn_properties = props
        return key

    @classmethod
    def update_resource(cls, key: KmsKey, props: dict[str, Any], account_id: str, region_name: str) -> KmsKey:
        for name in IMMUTABLE:
            if props.get(name) != key.cfn_properties.get(name):
                raise ValueError(
                    f"You cannot change the {name} property of an existing KMS key ({key.id}); "
                    "CloudFormation fails the update so that the key is not deleted by a replacement"
                )
        cls._apply(key, props, account_id, region_name)
        key.cfn_properties = props
        return key

    def delete(self, account_id: str, region_name: str) -> None:
        window = int(self.cfn_properties.get("PendingWindowInDays", DEFAULT_PENDING_WINDOW_DAYS))
        self.delete_resource(self.id, account_id, region_name, window)

    @classmethod
    def delete_resource(
        cls, name: str, account_id: str, region_name: str, window: int = DEFAULT_PENDING_WINDOW_DAYS
    ) -> None:
        backend = kms_backends[account_id][region_name]
        if name in backend.keys:
            backend.schedule_key_deletion(name, window)
