"""moto's own CloudFormation types, deployed as CloudFormation deploys them.

Moto 5.2.5 lists about a hundred types (``CloudFormationModel.__subclasses__()``); a template using some of
them still fails, or deploys a resource a stack cannot describe or delete:

- a property CloudFormation treats as optional is read as required (``KeyError`` in moto, the stack rolls
  back): :data:`OPTIONAL_DEFAULTS` gives each such property the value CloudFormation (or the service) takes
  when the template leaves it out, and names a resource the template does not name the way CloudFormation
  does (an SSM parameter without ``Name`` failed with ``'NoneType' object has no attribute 'lower'``);
- a resource has no physical id: ``ListStackResources`` shows it empty, ``Ref`` gives moto's object, and
  deleting the stack looks the resource up by ``None``: :data:`PHYSICAL_IDS` says where each type keeps
  what CloudFormation's ``Ref`` returns;
- a type cannot be deleted (route tables: the VPC then refuses deletion, and so does the stack):
  :data:`DELETERS`.

:func:`install` (the ``moto-types-deployable`` patch of :mod:`idempotent_local.patches`) applies the three
tables; ``tests/local/test_every_moto_type.py`` deploys and deletes a template of every type moto lists.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moto.cloudformation import parsing

# The resource name moto generated for a resource whose template names none (``STACK-LOGICALID-SUFFIX``).
GENERATED = object()

# Type -> {dotted property path: what CloudFormation takes when the template leaves it out}; GENERATED is
# the name it generates. Only what moto reads as required is listed.
OPTIONAL_DEFAULTS: dict[str, dict[str, Any]] = {
    "AWS::ApiGateway::Method": {"Integration.IntegrationHttpMethod": None, "Integration.Uri": None},
    "AWS::Batch::ComputeEnvironment": {"ComputeResources": None},  # none for an UNMANAGED one
    "AWS::Batch::JobDefinition": {"RetryStrategy": {}},
    "AWS::DataPipeline::Pipeline": {"Activate": False},
    "AWS::EC2::SpotFleet": {"SpotFleetRequestConfigData.AllocationStrategy": "lowestPrice"},
    "AWS::EC2::TransitGateway": {"Description": ""},
    "AWS::EC2::VPCEndpoint": {"RouteTableIds": [], "SubnetIds": [], "SecurityGroupIds": []},
    "AWS::SSM::Parameter": {"Name": GENERATED},
    "AWS::SSM::Document": {"DocumentFormat": "JSON", "Name": GENERATED},
}

# Types whose names CloudFormation generates in lower case (ECR repository names cannot hold capitals).
LOWER_CASE_NAMES = frozenset({"AWS::ECR::Repository"})


def _security_group_rule_id(rule: Any) -> str:
    digest = hashlib.sha256(
        json.dumps([rule.security_group.id, rule.properties], sort_keys=True, default=str).encode()
    )
    return f"sgr-{digest.hexdigest()[:17]}"


# Type -> the physical id (what ``Ref`` returns in CloudFormation), for the types moto gives none.
PHYSICAL_IDS: dict[str, Callable[[Any], str]] = {
    "AWS::AutoScaling::ScheduledAction": lambda r: r.scheduled_action_name,
    "AWS::EC2::SecurityGroupIngress": _security_group_rule_id,
    "AWS::EC2::VolumeAttachment": lambda r: f"{r.volume.id}|{r.instance.id}|{r.device}",
    "AWS::EFS::AccessPoint": lambda r: r.access_point_id,
    "AWS::Events::Archive": lambda r: r.name,
    "AWS::Events::EventBus": lambda r: r.name,
    "AWS::IoT::BillingGroup": lambda r: r.billing_group_name,
    "AWS::IoT::JobTemplate": lambda r: r.job_template_id,
    "AWS::IoT::Policy": lambda r: r.name,
    "AWS::IoT::RoleAlias": lambda r: r.role_alias,
    "AWS::IoT::Thing": lambda r: r.thing_name,
    "AWS::IoT::ThingType": lambda r: r.thing_type_name,
    "AWS::Lambda::LayerVersion": lambda r: r.arn,
    "AWS::Lambda::Permission": lambda r: r._template.name,
    "AWS::ApiGateway::Deployment": lambda r: r.id,
    "AWS::ApiGateway::Method": lambda r: r._template.name,
    "AWS::RDS::DBParameterGroup": lambda r: r.name,
    "AWS::RDS::DBSecurityGroup": lambda r: r.name,
    "AWS::RDS::DBSubnetGroup": lambda r: r.name,
    "AWS::Redshift::Cluster": lambda r: r.cluster_identifier,
    "AWS::Redshift::ClusterParameterGroup": lambda r: r.name,
    "AWS::Redshift::ClusterSubnetGroup": lambda r: r.cluster_subnet_group_name,
}


@dataclass(frozen=True)
class Template:
    """What a resource was created from, kept on it (``_template``) for the ids above."""

    name: str  # the resource name: the template's, or the one moto generated
    properties: dict[str, Any]
    account_id: str
    region_name: str


def _delete_route_table(table: Any, account_id: str, region_name: str) -> None:
    from moto.ec2.models import ec2_backends

    ec2_backends[account_id][region_name].delete_route_table(table.id)


def _delete_route(route: Any, account_id: str, region_name: str) -> None:
    from moto.ec2.models import ec2_backends

    ec2_backends[account_id][region_name].delete_route(
        route.route_table.id,
        route.destination_cidr_block,
        destination_ipv6_cidr_block=route.destination_ipv6_cidr_block,
        destination_prefix_list_id=route.destination_prefix_list.id
        if route.destination_prefix_list
        else None,
    )


def _delete_route_table_association(association: Any, account_id: str, region_name: str) -> None:
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[account_id][region_name]
    table = backend.get_route_table(association.route_table_id)
    for association_id, subnet_id in list(table._associations.items()):
        if subnet_id == association.subnet_id:
            backend.disassociate_route_table(association_id)


# Type -> how a stack deletes it, for the types moto cannot delete (it keeps them, and what they belong to
# cannot be deleted either).
DELETERS: dict[str, Callable[[Any, str, str], None]] = {
    "AWS::EC2::RouteTable": _delete_route_table,
    "AWS::EC2::Route": _delete_route,
    "AWS::EC2::SubnetRouteTableAssociation": _delete_route_table_association,
}


def _set(properties: dict[str, Any], path: str, value: Any) -> None:
    *parents, name = path.split(".")
    for parent in parents:
        found = properties.get(parent)
        if not isinstance(found, dict):
            return  # the enclosing property is absent: nothing of it is read
        properties = found
    properties.setdefault(name, value)


def with_defaults(kind: str, resource_name: str, cloudformation_json: dict[str, Any]) -> dict[str, Any]:
    """The template of one resource with the properties moto reads as required filled in."""
    properties = dict(cloudformation_json.get("Properties") or {})
    for path, default in OPTIONAL_DEFAULTS.get(kind, {}).items():
        if default is GENERATED:
            default = resource_name.lower() if kind in LOWER_CASE_NAMES else resource_name
        _set(properties, path, json.loads(json.dumps(default)))
    return {**cloudformation_json, "Properties": properties}


def _creating(kind: str, original: Any) -> Any:
    def create(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kw: Any,
    ) -> Any:
        name_property = parsing.resource_name_property_from_type(kind)
        if kind in LOWER_CASE_NAMES and name_property not in (cloudformation_json.get("Properties") or {}):
            resource_name = resource_name.lower()
        template = with_defaults(kind, resource_name, cloudformation_json)
        resource = original.__func__(cls, resource_name, template, account_id, region_name, **kw)
        if resource is not None:
            vars(resource)["_template"] = Template(
                resource_name, template["Properties"], account_id, region_name
            )
        return resource

    return classmethod(create)


def _updating(kind: str, original: Any) -> Any:
    def update(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        *args: Any,
        **kw: Any,
    ) -> Any:
        template = with_defaults(kind, new_resource_name, cloudformation_json)
        return original.__func__(cls, original_resource, new_resource_name, template, *args, **kw)

    return classmethod(update)


def install(replace: Callable[[Any, str, Callable[[Any], Any]], None]) -> None:
    """Apply the tables to moto's classes through ``replace(owner, name, make)`` (the patch registry's, so a
    second install replaces the first)."""
    from moto.batch import models as batch

    models = parsing.get_model_map()
    # Batch reads its templates through this helper, which fails on a property left out (None).
    replace(
        batch,
        "lowercase_first_key",
        lambda original: lambda value: None if value is None else original(value),
    )
    for kind in set(OPTIONAL_DEFAULTS) | set(PHYSICAL_IDS) | LOWER_CASE_NAMES:
        model = models[kind]
        replace(model, "create_from_cloudformation_json", functools.partial(_creating, kind))
        if kind in OPTIONAL_DEFAULTS and "update_from_cloudformation_json" in vars(model):
            replace(model, "update_from_cloudformation_json", functools.partial(_updating, kind))
    for kind, physical_id in PHYSICAL_IDS.items():
        replace(models[kind], "physical_resource_id", _instead(property(physical_id)))
    for kind, deleter in DELETERS.items():
        replace(models[kind], "delete", _instead(deleter))


def _instead(value: Any) -> Callable[[Any], Any]:
    """A ``make`` for ``replace`` that puts ``value`` in place of the original."""
    return lambda original: value


__all__ = ["DELETERS", "OPTIONAL_DEFAULTS", "PHYSICAL_IDS", "install", "with_defaults"]
