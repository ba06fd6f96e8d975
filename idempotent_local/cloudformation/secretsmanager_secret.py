"""``AWS::SecretsManager::Secret``: moto 5.2.5 does not know the type."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.secretsmanager.models import secretsmanager_backends

from idempotent_local.cloudformation._common import StackResource, StateOnlyType, tags

# GenerateSecretString's options and Secrets Manager's defaults (GetRandomPassword).
PASSWORD_OPTIONS = {
    "PasswordLength": ("password_length", 32),
    "ExcludeCharacters": ("exclude_characters", ""),
    "ExcludeNumbers": ("exclude_numbers", False),
    "ExcludePunctuation": ("exclude_punctuation", False),
    "ExcludeUppercase": ("exclude_uppercase", False),
    "ExcludeLowercase": ("exclude_lowercase", False),
    "IncludeSpace": ("include_space", False),
    "RequireEachIncludedType": ("require_each_included_type", True),
}


def secret_string(backend: Any, props: dict[str, Any]) -> str | None:
    """The template's ``SecretString``, or the one ``GenerateSecretString`` describes: a random password,
    alone or as ``GenerateStringKey`` in the JSON of ``SecretStringTemplate``."""
    if "SecretString" in props or "GenerateSecretString" not in props:
        return props.get("SecretString")
    spec = props["GenerateSecretString"] or {}
    options = {name: spec.get(key, default) for key, (name, default) in PASSWORD_OPTIONS.items()}
    password = json.loads(backend.get_random_password(**options))["RandomPassword"]
    if "SecretStringTemplate" in spec:
        document = json.loads(spec["SecretStringTemplate"])
        document[spec["GenerateStringKey"]] = password
        return json.dumps(document)
    return password


def _name(backend: Any, arn: str) -> str | None:
    """The name of the secret ``arn`` (moto keeps secrets by name), or None once it is gone."""
    return next((name for name, secret in backend.secrets.items() if secret.arn == arn), None)


def _delete(resolved: dict[str, Any], arn: str, account_id: str, region_name: str) -> None:
    backend = secretsmanager_backends[account_id][region_name]
    name = _name(backend, arn)
    if name is not None:
        backend.delete_secret(name, recovery_window_in_days=None, force_delete_without_recovery=True)


class SecretsManagerSecret(StateOnlyType, CloudFormationModel):
    """``AWS::SecretsManager::Secret``: a secret with the template's value, or a generated one
    (``GenerateSecretString``); its ``Ref`` and ``Id`` are the ARN. Another ``Name`` replaces it, another
    value becomes a new version; deleting the stack deletes it at once."""

    TYPE = "AWS::SecretsManager::Secret"
    NAME = "Name"
    GET_ATT = {"Id": "physical_id"}

    @classmethod
    def create(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
        backend = secretsmanager_backends[account_id][region_name]
        created = json.loads(
            backend.create_secret(
                name=props.get("Name", name),
                secret_string=secret_string(backend, props),
                secret_binary=None,
                description=props.get("Description"),
                tags=[{"Key": k, "Value": v} for k, v in tags(props).items()],
                kms_key_id=props.get("KmsKeyId"),
                client_request_token=None,
                replica_regions=[],
                force_overwrite=False,
            )
        )
        return StackResource(created["ARN"], props, _delete, {"Id": created["ARN"]})

    @classmethod
    def update(
        cls, resource: StackResource, props: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        backend = secretsmanager_backends[account_id][region_name]
        old = resource.properties
        changed_value = any(old.get(k) != props.get(k) for k in ("SecretString", "GenerateSecretString"))
        backend.update_secret(
            _name(backend, resource.physical_id) or resource.physical_id,
            secret_string=secret_string(backend, props) if changed_value else None,
            kms_key_id=props.get("KmsKeyId"),
            description=props.get("Description", ""),
        )
