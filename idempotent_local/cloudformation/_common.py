"""What the taught CloudFormation types share: property access and a resource kept as stack state only."""

from __future__ import annotations

from typing import Any


def as_bool(value: Any) -> bool:
    return str(value).lower() == "true"


def properties(cloudformation_json: dict[str, Any]) -> dict[str, Any]:
    return cloudformation_json.get("Properties") or {}


def retained_on_replace(cloudformation_json: dict[str, Any]) -> bool:
    """Whether the resource's old physical resource outlives its replacement (``UpdateReplacePolicy:
    Retain``, what CDK writes for ``RemovalPolicy.RETAIN``). Moto 5.2.5 deletes it whatever the policy."""
    return cloudformation_json.get("UpdateReplacePolicy") == "Retain"


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


class StateOnlyType:
    """A mixin for a taught type that lives only as stack state (:class:`StackResource`): named by
    ``TYPE``, no physical name, its properties kept on create and update, undone by the resource's own
    ``delete``. A mixin, not a ``CloudFormationModel`` subclass: moto finds types among that class's direct
    subclasses, so each type is declared ``class X(StateOnlyType, CloudFormationModel)``."""

    TYPE: str

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @classmethod
    def cloudformation_type(cls) -> str:
        return cls.TYPE

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> StackResource:
        return StackResource(resource_name, properties(cloudformation_json))

    @classmethod
    def update_from_cloudformation_json(
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
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        return None  # the targets are only known resolved, on the resource (see StackResource.delete)


class AttachedPolicy(StateOnlyType):
    """A policy document set on every resource listed under ``TARGETS`` (``AWS::SQS::QueuePolicy``,
    ``AWS::SNS::TopicPolicy``): set on create, taken off the targets an update drops, and off every target
    still there on delete."""

    TARGETS: str

    @classmethod
    def attach(cls, targets: list[str], document: dict[str, Any], account_id: str, region_name: str) -> None:
        raise NotImplementedError

    @classmethod
    def detach(cls, targets: list[str], account_id: str, region_name: str) -> None:
        raise NotImplementedError

    @classmethod
    def create_from_cloudformation_json(
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> StackResource:
        props = properties(cloudformation_json)
        cls.attach(props[cls.TARGETS], props["PolicyDocument"], account_id, region_name)

        def undo(resolved: dict[str, Any], _: str, account: str, region: str) -> None:
            cls.detach(resolved.get(cls.TARGETS, []), account, region)

        return StackResource(resource_name, props, undo)

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
        kept = set(props[cls.TARGETS])
        dropped = [t for t in original_resource.properties.get(cls.TARGETS, []) if t not in kept]
        cls.detach(dropped, account_id, region_name)
        cls.attach(props[cls.TARGETS], props["PolicyDocument"], account_id, region_name)
        original_resource.properties = props
        return original_resource
