"""What the taught CloudFormation types share: property access and a resource kept as stack state only."""

from __future__ import annotations

from typing import Any


def as_bool(value: Any) -> bool:
    return str(value).lower() == "true"


def properties(cloudformation_json: dict[str, Any]) -> dict[str, Any]:
    return cloudformation_json.get("Properties") or {}


def queue_name(url_or_arn: str) -> str:
    return url_or_arn.rsplit("/", 1)[-1].rsplit(":", 1)[-1]


class StackResource:
    """A resource that lives only as CloudFormation state (its effect lives in another backend).

    ``deleter(properties, physical_id, account_id, region_name)`` undoes the effect. Moto deletes a resource
    through its ``delete`` method when it has one: with the *resolved* properties kept here, where the
    class-level ``delete_from_cloudformation_json`` would only see the template's unresolved ``Ref``s.
    """

    def __init__(self, physical_id: str, properties: dict[str, Any], deleter: Any = None) -> None:
        self.physical_id = physical_id
        self.properties = properties
        self.deleter = deleter

    @property
    def physical_resource_id(self) -> str:
        return self.physical_id

    def get_cfn_attribute(self, attribute_name: str) -> str:
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        raise UnformattedGetAttTemplateException()

    def delete(self, account_id: str, region_name: str) -> None:
        if self.deleter is not None:
            self.deleter(self.properties, self.physical_id, account_id, region_name)

    def is_created(self) -> bool:
        return True
