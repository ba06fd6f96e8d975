"""How CloudFormation changes a stack, for moto's ``ResourceMap.update``.

Moto 5.2.5 deletes the resources an update drops first (retained ones too) and keeps their records, so a
resource added back later is never created again; it never updates a resource whose template is unchanged
but which refers to a replaced one (a subscription or event source mapping keeps pointing at the deleted
queue); and it stops half-way on a failure, with no rollback. CloudFormation instead:

1. creates, updates and replaces resources in dependency order; a resource whose properties refer to a
   replaced resource, or read an attribute an in-place update changed (``Fn::GetAtt Table.StreamArn`` once
   the table's stream was turned off and on), is updated too, and replaced itself when such a property
   requires replacement;
2. refuses to replace a resource whose name the template sets and keeps ("CloudFormation cannot update a
   stack when a custom-named resource requires replacing");
3. only when all of that succeeded, deletes the resources the template dropped and the ones replaced,
   except those whose ``DeletionPolicy`` / ``UpdateReplacePolicy`` retains them;
4. on a failure, rolls back: what it created is deleted, what it updated is updated back to the previous
   template, nothing was deleted yet. The stack ends in ``UPDATE_ROLLBACK_COMPLETE`` (``ROLLBACK_COMPLETE``
   for a change set that creates the stack), with the failed resource and its reason in the stack events.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from moto.cloudformation import parsing

from idempotent_local.emulator import NOTE_PREFIX

log = logging.getLogger(__name__)

# Properties whose change replaces the resource (CloudFormation's "Update requires: Replacement"), for the
# types a pipeline uses; any other property of these types, and of other types, is updated in place.
REPLACING_PROPERTIES: dict[str, frozenset[str]] = {
    "AWS::SQS::Queue": frozenset({"QueueName", "FifoQueue"}),
    "AWS::SNS::Topic": frozenset({"TopicName", "FifoTopic"}),
    "AWS::SNS::Subscription": frozenset({"TopicArn", "Endpoint", "Protocol", "Region"}),
    "AWS::DynamoDB::Table": frozenset({"TableName", "KeySchema"}),
    "AWS::Lambda::Function": frozenset({"FunctionName", "PackageType"}),
    "AWS::Lambda::EventSourceMapping": frozenset(
        {"EventSourceArn", "StartingPosition", "StartingPositionTimestamp", "SelfManagedEventSource"}
    ),
    "AWS::IAM::Role": frozenset({"RoleName", "Path"}),
    "AWS::IAM::Policy": frozenset(),
    "AWS::Logs::LogGroup": frozenset({"LogGroupName"}),
    "AWS::CloudWatch::Alarm": frozenset({"AlarmName"}),
    "AWS::CloudWatch::Dashboard": frozenset({"DashboardName"}),
    "AWS::KMS::Key": frozenset(),
    "AWS::StepFunctions::StateMachine": frozenset({"StateMachineName", "StateMachineType"}),
}

# What the emulator does not model, said (as a stack event) when an update changes the property: (type,
# property) -> (note, also when the template drops the property).
NOT_MODELLED: dict[tuple[str, str], tuple[str, bool]] = {
    ("AWS::DynamoDB::Table", "TimeToLiveSpecification"): (
        "AWS allows about one TimeToLive change per table an hour: another change within the hour fails "
        "there (the emulator does not limit it)",
        True,
    ),
    ("AWS::SQS::Queue", "KmsMasterKeyId"): (
        "the emulator neither encrypts with a KMS key nor applies its key policy: a key that keeps SNS out "
        "loses messages only in AWS",
        False,
    ),
    ("AWS::SNS::Topic", "KmsMasterKeyId"): (
        "the emulator neither encrypts with a KMS key nor applies its key policy: a key that keeps a "
        "publisher or CloudWatch out fails only in AWS",
        False,
    ),
}
RETAINED_ON_DELETE = ("Retain", "RetainExceptOnCreate")  # DeletionPolicy values that keep the resource
PSEUDO_PARAMETER = "AWS::"
SUB_VARIABLE = re.compile(r"\$\{([^!}][^}]*)\}")  # ${Name} or ${Name.Attribute} in Fn::Sub; ${!x} is literal
CUSTOM_NAME = (
    "CloudFormation cannot update a stack when a custom-named resource requires replacing. "
    "Rename {name} and update the stack again."
)


@dataclass
class UpdateFailed(Exception):
    """A resource could not be created or updated (``action``); the stack was rolled back, fully unless
    ``rollback_failures`` names what could not be undone."""

    logical_id: str
    resource_type: str
    action: str  # CREATE or UPDATE
    reason: str
    rollback_failures: list[str]

    def __str__(self) -> str:
        return f"{self.logical_id} ({self.resource_type}): {self.reason}"


def _reason(error: Exception) -> str:
    """What a failed resource's event says: the service's own message (moto's errors carry it beside an
    HTTP status and a JSON or XML body)."""
    message = getattr(error, "message", None)
    return message if isinstance(message, str) and message else str(error)


def references(value: Any) -> set[str]:
    """The logical ids and parameters ``value`` refers to (``Ref``, ``Fn::GetAtt``, ``Fn::Sub``)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "Ref" and isinstance(item, str):
                found.add(item)
            elif key == "Fn::GetAtt":
                target = item.split(".", 1)[0] if isinstance(item, str) else item[0]
                found.add(target)
            elif key == "Fn::Sub":
                text = item[0] if isinstance(item, list) else item
                found |= {name.split(".", 1)[0] for name in SUB_VARIABLE.findall(str(text))}
                if isinstance(item, list):
                    found |= references(item[1:])
            else:
                found |= references(item)
    elif isinstance(value, list):
        for item in value:
            found |= references(item)
    return {name for name in found if not name.startswith(PSEUDO_PARAMETER)}


def attribute_reads(value: Any) -> Iterator[tuple[str, Any]]:
    """Every ``(logical id, attribute)`` that ``value`` reads with ``Fn::GetAtt`` or ``Fn::Sub``."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "Fn::GetAtt":
                yield tuple(item.split(".", 1)) if isinstance(item, str) else (item[0], item[1])  # type: ignore[misc]
            elif key == "Fn::Sub":
                text = item[0] if isinstance(item, list) else item
                for name in SUB_VARIABLE.findall(str(text)):
                    if "." in name:
                        yield tuple(name.split(".", 1))  # type: ignore[misc]
                yield from attribute_reads(item)
            else:
                yield from attribute_reads(item)
    elif isinstance(value, list):
        for item in value:
            yield from attribute_reads(item)


def dependency_order(resources: dict[str, Any]) -> list[str]:
    """The logical ids of ``resources``, each after every resource it refers to or ``DependsOn``."""
    ordered: list[str] = []
    visiting: set[str] = set()

    def visit(logical_id: str) -> None:
        if logical_id in ordered or logical_id in visiting:
            return  # a cycle is the template's error (refused when the template is checked)
        visiting.add(logical_id)
        spec = resources[logical_id]
        depends = spec.get("DependsOn", [])
        for target in sorted(references(spec) | set([depends] if isinstance(depends, str) else depends)):
            if target in resources:
                visit(target)
        visiting.discard(logical_id)
        ordered.append(logical_id)

    for logical_id in resources:
        visit(logical_id)
    return ordered


def _properties(spec: dict[str, Any]) -> dict[str, Any]:
    return spec.get("Properties") or {}


def _attribute(resource: Any, name: str) -> Any:
    """The ``Fn::GetAtt`` value ``name`` of ``resource``, or None where it has none (now)."""
    try:
        return resource.get_cfn_attribute(name)
    except Exception:
        return None


@dataclass
class _Step:
    kind: str  # "created", "replaced" or "updated"
    logical_id: str
    previous: Any = None  # the resource before the step (replaced or updated in place)


@dataclass
class StackUpdate:
    """One update of one stack's resources (``ResourceMap.update``), with its rollback."""

    resources: Any  # moto's ResourceMap
    template: dict[str, Any]
    parameters: dict[str, Any] | None
    steps: list[_Step] = field(default_factory=list)
    replaced: set[str] = field(default_factory=set)
    changed_attributes: set[tuple[str, str]] = field(default_factory=set)  # (logical id, attribute)
    action: str = "UPDATE"  # what is being done to the current resource
    # (logical id, type, what the emulator does not model) for the stack's events
    notes: list[tuple[str, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        rm = self.resources
        self.old_template, self.old_specs = rm._template, dict(rm._resource_json_map)
        self.old_parsed, self.old_inputs = dict(rm._parsed_resources), rm.input_parameters
        self.old_parameters = dict(rm.resolved_parameters)
        self.specs: dict[str, Any] = self.template["Resources"]

    def run(self) -> None:
        rm = self.resources
        rm._template = self.template
        if self.parameters:
            rm.input_parameters = self.parameters
        try:
            rm.load_mapping()
            rm.load_parameters()
            rm.load_conditions()
        except Exception:
            self._restore()  # a parameter the template lacks: the request's error, nothing changed
            raise
        rm._resource_json_map = self.specs
        changed_parameters = {
            name for name, value in rm.resolved_parameters.items() if self.old_parameters.get(name) != value
        }
        current = ""
        try:
            for current in dependency_order(self.specs):
                self._apply(current, changed_parameters)
        except Exception as error:
            failures = self._roll_back()
            kind = self.specs.get(current, {}).get("Type", "")
            raise UpdateFailed(current, kind, self.action, _reason(error), failures) from error
        self._clean_up()
        self.resources.emulator_notes = self.notes

    def _apply(self, logical_id: str, changed_parameters: set[str]) -> None:
        rm, spec = self.resources, self.specs[logical_id]
        previous = self.old_parsed.get(logical_id)
        if previous is None or logical_id not in self.old_specs:
            self.action = "CREATE"
            if rm[logical_id] is not None:  # moto creates on first access (None: a condition or no type)
                self.steps.append(_Step("created", logical_id))
            return
        if not self._wanted(spec):
            return  # its condition no longer holds: removed when the update succeeded
        old_properties, new_properties = _properties(self.old_specs[logical_id]), _properties(spec)
        inputs = self.replaced | changed_parameters
        changed = {
            name
            for name in set(old_properties) | set(new_properties)
            if old_properties.get(name) != new_properties.get(name)
            or references(new_properties.get(name)) & inputs
            or set(attribute_reads(new_properties.get(name))) & self.changed_attributes
        }
        if not changed:
            return  # only its policies or metadata changed: nothing to do to the resource
        kind = spec["Type"]
        for name in changed:
            note, when_dropped = NOT_MODELLED.get((kind, name), ("", False))
            if note and (when_dropped or name in new_properties):
                self.notes.append((logical_id, kind, note))
        if changed & REPLACING_PROPERTIES.get(kind, frozenset()):
            name_property = parsing.resource_name_property_from_type(kind)
            if name_property and name_property in new_properties and name_property not in changed:
                raise RuntimeError(
                    CUSTOM_NAME.format(name=getattr(previous, "physical_resource_id", logical_id))
                )
            rm._parsed_resources.pop(logical_id, None)
            self.action = "CREATE"
            rm[logical_id]  # moto creates it on first access, with a new generated name
            self.steps.append(_Step("replaced", logical_id, previous))
            self.replaced.add(logical_id)
            log.info("replaced %s (%s): %s", logical_id, kind, ", ".join(sorted(changed)))
            return
        self.action = "UPDATE"
        self.steps.append(_Step("updated", logical_id, previous))  # undone even if it fails half-way
        read = {attribute for target, attribute in attribute_reads(self.template) if target == logical_id}
        before = {attribute: _attribute(previous, attribute) for attribute in read}
        rm._parsed_resources[logical_id] = updated = self._update_in_place(logical_id, spec, previous)
        self.changed_attributes |= {(logical_id, a) for a in read if _attribute(updated, a) != before[a]}

    def _update_in_place(self, logical_id: str, spec: dict[str, Any], previous: Any) -> Any:
        rm = self.resources
        updated = parsing.parse_and_update_resource(logical_id, spec, rm, rm._account_id, rm._region_name)
        if updated is None:  # moto cannot update this type: the resource stays as it was
            kind = spec.get("Type", "")
            self.notes.append(
                (logical_id, kind, f"the emulator cannot update {kind}: it kept its properties")
            )
            log.warning("no update support for %s (%s): kept as it was", logical_id, kind)
            return previous
        return updated

    def _wanted(self, spec: dict[str, Any]) -> bool:
        condition = spec.get("Condition")
        return not condition or bool(self.resources.lazy_condition_map[condition])

    def _clean_up(self) -> None:
        """What only goes once the update succeeded: dropped resources, then replaced ones (each unless
        its policy retains it). A failure here leaves the resource behind, as CloudFormation does."""
        rm = self.resources
        dropped = [
            logical_id
            for logical_id in reversed(dependency_order(self.old_specs))
            if self.old_parsed.get(logical_id) is not None
            and (logical_id not in self.specs or not self._wanted(self.specs[logical_id]))
        ]
        for logical_id in dropped:
            spec = self.old_specs[logical_id]
            rm._parsed_resources.pop(logical_id, None)
            self._delete(self.old_parsed[logical_id], spec, spec.get("DeletionPolicy") in RETAINED_ON_DELETE)
        for step in self.steps:
            if step.kind == "replaced":
                spec = self.old_specs[step.logical_id]
                self._delete(step.previous, spec, spec.get("UpdateReplacePolicy") == "Retain")

    def _delete(self, resource: Any, spec: dict[str, Any], retained: bool) -> None:
        name = getattr(resource, "physical_resource_id", resource)
        if retained:
            log.info("kept %s (%s): its policy retains it", name, spec.get("Type"))
            return
        try:
            self.resources._delete_resource(resource, spec)
        except Exception as error:  # CloudFormation: DELETE_FAILED, the update still succeeded
            log.warning("could not delete %s (%s): %s", name, spec.get("Type"), error)

    def _restore(self) -> None:
        rm = self.resources
        rm._template, rm._resource_json_map = self.old_template, self.old_specs
        rm.input_parameters = self.old_inputs
        rm._parsed_resources = dict(self.old_parsed)
        rm.load_mapping()
        rm.load_parameters()
        rm.load_conditions()

    def _roll_back(self) -> list[str]:
        """Undo the steps, last first; returns what could not be undone."""
        rm, created = self.resources, dict(self.resources._parsed_resources)
        self._restore()
        failures = []
        for step in reversed(self.steps):
            try:
                if step.kind == "updated":
                    spec = self.old_specs[step.logical_id]
                    rm._parsed_resources[step.logical_id] = self._update_in_place(
                        step.logical_id, spec, step.previous
                    )
                elif step.logical_id in created:
                    self._delete(created[step.logical_id], self.specs[step.logical_id], self._kept(step))
            except Exception as error:
                failures.append(f"{step.logical_id}: {error}")
        return failures

    def _kept(self, step: _Step) -> bool:
        """Whether rolling back keeps what ``step`` created: a new resource whose DeletionPolicy is
        Retain (RetainExceptOnCreate: deleted when its creation is rolled back), a replacement whose
        UpdateReplacePolicy is."""
        spec = self.specs[step.logical_id]
        if step.kind == "replaced":
            return spec.get("UpdateReplacePolicy") == "Retain"
        return spec.get("DeletionPolicy") == "Retain"


def update(resources: Any, template: dict[str, Any], parameters: dict[str, Any] | None = None) -> None:
    """``ResourceMap.update`` as CloudFormation does it (see the module docstring)."""
    StackUpdate(resources, template, parameters).run()


def roll_back_stack(stack: Any, failure: UpdateFailed, *, creating: bool) -> None:
    """Record a rolled-back operation on ``stack`` as CloudFormation does: the resource's ``*_FAILED``
    event with the reason, then ``[UPDATE_]ROLLBACK_IN_PROGRESS`` and ``..._COMPLETE`` (``..._FAILED`` when
    something could not be undone), which is also the stack's status."""
    from moto.cloudformation.models import Event

    prefix = "" if creating else "UPDATE_"
    event = Event(
        stack_id=stack.stack_id,
        stack_name=stack.name,
        logical_resource_id=failure.logical_id,
        physical_resource_id="",
        resource_type=failure.resource_type,
        resource_status=f"{failure.action}_FAILED",
        resource_status_reason=failure.reason,
        resource_properties=None,
    )
    stack.events.append(event)
    operation = "create" if creating else "update"
    reason = f"The following resource(s) failed to {operation}: [{failure.logical_id}]. {failure.reason}"
    stack._add_stack_event(f"{prefix}ROLLBACK_IN_PROGRESS", resource_status_reason=reason)
    final = f"{prefix}ROLLBACK_{'FAILED' if failure.rollback_failures else 'COMPLETE'}"
    stack._add_stack_event(final, resource_status_reason="; ".join(failure.rollback_failures) or None)
    stack.status, stack.status_reason = final, reason
    log.warning("stack %s: %s (%s)", stack.name, reason, final)


def record_notes(stack: Any) -> None:
    """The notes of the update that just succeeded, as ``UPDATE_COMPLETE`` events of their resources."""
    from moto.cloudformation.models import Event

    for logical_id, kind, note in getattr(stack.resource_map, "emulator_notes", []):
        resource = stack.resource_map._parsed_resources.get(logical_id)
        event = Event(
            stack_id=stack.stack_id,
            stack_name=stack.name,
            logical_resource_id=logical_id,
            physical_resource_id=getattr(resource, "physical_resource_id", ""),
            resource_type=kind,
            resource_status="UPDATE_COMPLETE",
            resource_status_reason=NOTE_PREFIX + note,
            resource_properties=None,
        )
        stack.events.append(event)
    stack.resource_map.emulator_notes = []


def stack_update(original: Any) -> Any:
    """``Stack.update`` (UpdateStack): a failed update leaves the stack as it was, in
    ``UPDATE_ROLLBACK_COMPLETE``, and the request itself succeeds (CloudFormation fails asynchronously)."""

    def update(self: Any, template: str, *args: Any, **kwargs: Any) -> None:
        previous = self.template
        self.status_reason = None
        try:
            original(self, template, *args, **kwargs)
        except UpdateFailed as failure:
            self.template = previous
            self._parse_template()
            self.output_map = self._create_output_map()
            roll_back_stack(self, failure, creating=False)
            return
        record_notes(self)

    return update


def change_set_execution(original: Any) -> Any:
    """``CloudFormationBackend.execute_change_set``: a failed change set rolls the stack back
    (``ROLLBACK_COMPLETE`` for one that creates the stack); one that succeeds refreshes the stack's outputs
    and description (moto keeps those of the template the stack had before)."""

    def execute_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        change_set = self.change_sets.get(change_set_name) or next(
            (c for c in self.change_sets.values() if c.change_set_name == change_set_name), None
        )
        if change_set is None:
            return original(self, change_set_name, stack_name)  # moto's answer for a missing change set
        change_set.stack.status_reason = None
        try:
            original(self, change_set_name, stack_name)
        except UpdateFailed as failure:
            change_set.execution_status = "EXECUTE_FAILED"
            roll_back_stack(change_set.stack, failure, creating=change_set.change_set_type == "CREATE")
            return
        stack = change_set.stack
        stack._parse_template()
        stack.output_map = stack._create_output_map()
        stack.description = stack.template_dict.get("Description")
        record_notes(stack)

    return execute_change_set
