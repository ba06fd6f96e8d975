"""What the taught CloudFormation types share: property access, a moto resource adopted as a taught type,
and a resource kept as stack state only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moto.cloudformation.exceptions import UnformattedGetAttTemplateException


class Taught:
    """A mixin that declares a taught type to moto's CloudFormation, listed first among the bases, before
    the moto class: its ``TYPE``, the property that names it (``NAME``; "" when none), its ``Fn::GetAtt``
    attributes, exactly AWS's, each read from the instance attribute ``GET_ATT`` maps it to; and moto's
    three hooks, each handed to :meth:`create_resource`, :meth:`update_resource` or
    :meth:`delete_resource` with the template's
    properties (resolved)."""

    TYPE: str
    NAME: str | None = None  # None: moto's own
    GET_ATT: Mapping[str, str] | None = None  # None: moto's own

    @classmethod
    def cloudformation_type(cls) -> str:
        return cls.TYPE

    @classmethod
    def cloudformation_name_type(cls) -> str:
        return super().cloudformation_name_type() if cls.NAME is None else cls.NAME  # type: ignore[misc]

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return super().has_cfn_attr(attr) if cls.GET_ATT is None else attr in cls.GET_ATT  # type: ignore[misc]

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        if self.GET_ATT is None:
            return super().get_cfn_attribute(attribute_name)  # type: ignore[misc]
        if attribute_name not in self.GET_ATT:
            raise UnformattedGetAttTemplateException()
        return getattr(self, self.GET_ATT[attribute_name])

    @classmethod
    def create_resource(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> Any:
        """The resource ``props`` make; ``name`` is the logical id's physical name."""
        raise NotImplementedError

    @classmethod
    def update_resource(cls, resource: Any, props: dict[str, Any], account_id: str, region_name: str) -> Any:
        """``resource`` changed in place to what ``props`` say (a change that replaces it never gets here:
        see ``_updates``)."""
        raise NotImplementedError

    @classmethod
    def delete_resource(cls, name: str, account_id: str, region_name: str) -> None:
        """Delete the resource named ``name``; one already gone is no error, as in CloudFormation."""

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> Any:
        return cls.create_resource(resource_name, properties(cloudformation_json), account_id, region_name)

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> Any:
        return cls.update_resource(
            original_resource, properties(cloudformation_json), account_id, region_name
        )

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        cls.delete_resource(resource_name, account_id, region_name)


def as_bool(value: Any) -> bool:
    return str(value).lower() == "true"


def properties(cloudformation_json: dict[str, Any]) -> dict[str, Any]:
    return cloudformation_json.get("Properties") or {}


def tags(props: dict[str, Any]) -> dict[str, str]:
    """The template's ``Tags`` (a list of ``Key`` / ``Value``) as a dict: all the tags the resource has."""
    return {t["Key"]: t["Value"] for t in props.get("Tags") or []}


def adopt(resource: Any, model: type) -> Any:
    """Make ``resource``, an object of a moto backend, an instance of the taught ``model``, a subclass of its
    moto class: the stack's resource stays the backend's own object (moto's code and tests see a moto
    queue, topic, key), answering ``Fn::GetAtt`` and deletion as the taught type does."""
    resource.__class__ = model
    return resource


def queue_name(url_or_arn: str) -> str:
    return url_or_arn.rsplit("/", 1)[-1].rsplit(":", 1)[-1]


@dataclass(eq=False)  # compared, and hashed, as the stack's object it is
class StackResource:
    """A resource that lives only as CloudFormation state (its effect lives in another backend).

    ``deleter(properties, physical_id, account_id, region_name)`` undoes the effect. Moto deletes a resource
    through its ``delete`` method when it has one: with the *resolved* properties kept here, where the
    class-level ``delete_from_cloudformation_json`` would only see the template's unresolved ``Ref``s.
    ``attributes`` holds its ``Fn::GetAtt`` values.
    """

    physical_id: str
    properties: dict[str, Any]
    deleter: Any = None
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def physical_resource_id(self) -> str:
        return self.physical_id

    def get_cfn_attribute(self, attribute_name: str) -> str:
        if attribute_name not in self.attributes:
            raise UnformattedGetAttTemplateException()
        return self.attributes[attribute_name]

    def delete(self, account_id: str, region_name: str) -> None:
        if self.deleter is not None:
            self.deleter(self.properties, self.physical_id, account_id, region_name)

    def is_created(self) -> bool:
        return True
