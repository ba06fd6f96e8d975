"""What the taught CloudFormation types share: property access and a resource kept as stack state only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Declared:
    """A mixin that declares a taught type to moto's CloudFormation: its ``TYPE``, the property that names
    it (``NAME``; "" when none) and its ``Fn::GetAtt`` attributes, exactly AWS's, each read from the
    instance attribute ``GET_ATT`` maps it to. Listed first among the bases, before the moto class."""

    TYPE: str
    NAME = ""
    GET_ATT: Mapping[str, str] = {}

    @classmethod
    def cloudformation_type(cls) -> str:
        return cls.TYPE

    @classmethod
    def cloudformation_name_type(cls) -> str:
        return cls.NAME

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in cls.GET_ATT

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        if attribute_name not in self.GET_ATT:
            raise UnformattedGetAttTemplateException()
        return getattr(self, self.GET_ATT[attribute_name])


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


class StackResource:
    """A resource that lives only as CloudFormation state (its effect lives in another backend).

    ``deleter(properties, physical_id, account_id, region_name)`` undoes the effect. Moto deletes a resource
    through its ``delete`` method when it has one: with the *resolved* properties kept here, where the
    class-level ``delete_from_cloudformation_json`` would only see the template's unresolved ``Ref``s.
    ``attributes`` holds its ``Fn::GetAtt`` values.
    """

    def __init__(
        self,
        physical_id: str,
        properties: dict[str, Any],
        deleter: Any = None,
        attributes: dict[str, str] | None = None,
    ) -> None:
        self.physical_id = physical_id
        self.properties = properties
        self.deleter = deleter
        self.attributes = attributes or {}

    @property
    def physical_resource_id(self) -> str:
        return self.physical_id

    def get_cfn_attribute(self, attribute_name: str) -> str:
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        if attribute_name not in self.attributes:
            raise UnformattedGetAttTemplateException()
        return self.attributes[attribute_name]

    def delete(self, account_id: str, region_name: str) -> None:
        if self.deleter is not None:
            self.deleter(self.properties, self.physical_id, account_id, region_name)

    def is_created(self) -> bool:
        return True


class StateOnlyType(Declared):
    """A mixin for a taught type that lives only as stack state (:class:`StackResource`): named by
    ``TYPE``, its effect made by :meth:`create` and changed by :meth:`update` (by default none: the
    properties are only kept), undone by the resource's own ``delete``. A mixin, not a
    ``CloudFormationModel`` subclass: moto finds types among that class's direct subclasses, so each type
    is declared ``class X(StateOnlyType, CloudFormationModel)``."""

    @classmethod
    def create(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
        """The resource ``props`` (resolved) make; ``name`` is the logical id's physical name."""
        return StackResource(name, props)

    @classmethod
    def update(
        cls, resource: StackResource, props: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        """Change ``resource``'s effect in place to what ``props`` say (``resource.properties`` are the
        previous ones; the new ones are kept after)."""

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> StackResource:
        return cls.create(resource_name, properties(cloudformation_json), account_id, region_name)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: StackResource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> StackResource:
        props = properties(cloudformation_json)
        cls.update(original_resource, props, account_id, region_name)
        original_resource.properties = props
        return original_resource

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        return None  # the targets are only known resolved, on the resource (see StackResource.delete)


class AttachedPolicy(StateOnlyType):
    """A policy document set on every resource listed under ``TARGETS`` (``AWS::SQS::QueuePolicy``,
    ``AWS::SNS::TopicPolicy``): set on create, taken off the targets an update drops, and off every target
    still there on delete."""

    TARGETS: str
    GET_ATT = {"Id": "physical_id"}

    @classmethod
    def attach(cls, targets: list[str], document: dict[str, Any], account_id: str, region_name: str) -> None:
        raise NotImplementedError

    @classmethod
    def detach(cls, targets: list[str], account_id: str, region_name: str) -> None:
        raise NotImplementedError

    @classmethod
    def create(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> StackResource:
        cls.attach(props[cls.TARGETS], props["PolicyDocument"], account_id, region_name)

        def undo(resolved: dict[str, Any], _: str, account: str, region: str) -> None:
            cls.detach(resolved.get(cls.TARGETS, []), account, region)

        return StackResource(name, props, undo, {"Id": name})

    @classmethod
    def update(
        cls, resource: StackResource, props: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        kept = set(props[cls.TARGETS])
        dropped = [t for t in resource.properties.get(cls.TARGETS, []) if t not in kept]
        cls.detach(dropped, account_id, region_name)
        cls.attach(props[cls.TARGETS], props["PolicyDocument"], account_id, region_name)
