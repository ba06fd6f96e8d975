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
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any

from moto.cloudformation import parsing

from idempotent_local.cloudformation._common import properties
from idempotent_local.names import NOTE_PREFIX
from idempotent_local.template import attribute_reads, dependency_order, references

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
    "AWS::S3::BucketPolicy": frozenset({"Bucket"}),
    "AWS::SecretsManager::Secret": frozenset({"Name"}),
    "AWS::ApiGateway::Stage": frozenset({"StageName", "RestApiId"}),
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


def _attribute(resource: Any, name: str) -> Any:
    """The ``Fn::GetAtt`` value ``name`` of ``resource``, or None where it has none (now)."""
    try:
        return resource.get_cfn_attribute(name)
    except Exception:
        return None


# A stack operation's first event, which starts a new OperationId (the CDK CLI reads a failed deployment's
# reasons from the events of its last operation, and of the one a rollback follows).
BEGINS_OPERATION = frozenset(
    f"{kind}_IN_PROGRESS" for kind in ("CREATE", "UPDATE", "DELETE", "REVIEW", "ROLLBACK", "UPDATE_ROLLBACK")
)
USER_INITIATED = "User Initiated"
REPLACING = "Requested update requires the creation of a new physical resource; hence creating one."
_OPERATIONS: dict[str, str] = {}  # stack id -> the OperationId of its current operation
# stack id -> the stack (moto takes a stack out of its backend's list before deleting its resources)
_STACKS: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def stack_event(original: Any) -> Any:
    """``Stack._add_stack_event``: an operation's first event starts a new OperationId and, when it has no
    reason (moto writes an update's change set without one), says "User Initiated", as CloudFormation's."""

    def add_stack_event(
        self: Any, resource_status: str, resource_status_reason: str | None = None, **kw: Any
    ) -> None:
        _STACKS[self.stack_id] = self
        if resource_status in BEGINS_OPERATION:
            _OPERATIONS[self.stack_id] = str(uuid.uuid4())
            if resource_status_reason is None and not resource_status.endswith("ROLLBACK_IN_PROGRESS"):
                resource_status_reason = USER_INITIATED
        original(self, resource_status, resource_status_reason=resource_status_reason, **kw)

    return add_stack_event


def event_operation(original: Any) -> Any:
    """``Event.__init__``: each event carries the OperationId of its stack's current operation."""

    def __init__(self: Any, stack_id: str, *args: Any, **kwargs: Any) -> None:
        original(self, stack_id, *args, **kwargs)
        self.operation_id = _OPERATIONS.get(stack_id)

    return __init__


def resource_event(
    resources: Any,
    logical_id: str,
    status: str,
    reason: str | None = None,
    *,
    spec: dict[str, Any] | None = None,
    resource: Any = None,
) -> None:
    """Record one resource's event on the stack that ``resources`` (moto's ResourceMap) belongs to; its type
    from ``spec`` and physical id from ``resource`` (default: the stack's current ones)."""
    stack = _STACKS.get(resources.stack_id)
    if stack is None:
        return
    spec = spec if spec is not None else resources._resource_json_map.get(logical_id) or {}
    resource = resource if resource is not None else resources._parsed_resources.get(logical_id)
    physical = getattr(resource, "physical_resource_id", "") if not isinstance(resource, str) else ""
    append_event(stack, logical_id, physical, spec.get("Type", ""), status, reason)


def append_event(
    stack: Any, logical_id: str, physical: Any, kind: str, status: str, reason: str | None
) -> None:
    """One resource's event, appended to ``stack``'s (moto's) events."""
    from moto.cloudformation.models import Event

    event = Event(
        stack_id=stack.stack_id,
        stack_name=stack.name,
        logical_resource_id=logical_id,
        physical_resource_id=physical if isinstance(physical, str) else "",
        resource_type=kind,
        resource_status=status,
        resource_status_reason=reason,
        resource_properties=None,
    )
    stack.events.append(event)


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
            if self._wanted(spec) and parsing.resource_class_from_type(spec.get("Type", "")) is not None:
                resource_event(rm, logical_id, "CREATE_IN_PROGRESS")
            if rm[logical_id] is not None:  # moto creates on first access (None: a condition or no type)
                self.steps.append(_Step("created", logical_id))
                resource_event(rm, logical_id, "CREATE_COMPLETE")
            return
        if not self._wanted(spec):
            return  # its condition no longer holds: removed when the update succeeded
        old_properties, new_properties = properties(self.old_specs[logical_id]), properties(spec)
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
            resource_event(rm, logical_id, "UPDATE_IN_PROGRESS", REPLACING, resource=previous)
            rm[logical_id]  # moto creates it on first access, with a new generated name
            self.steps.append(_Step("replaced", logical_id, previous))
            resource_event(rm, logical_id, "UPDATE_COMPLETE")
            self.replaced.add(logical_id)
            log.info("replaced %s (%s): %s", logical_id, kind, ", ".join(sorted(changed)))
            return
        self.action = "UPDATE"
        self.steps.append(_Step("updated", logical_id, previous))  # undone even if it fails half-way
        read = {attribute for target, attribute in attribute_reads(self.template) if target == logical_id}
        before = {attribute: _attribute(previous, attribute) for attribute in read}
        resource_event(rm, logical_id, "UPDATE_IN_PROGRESS")
        rm._parsed_resources[logical_id] = updated = self._update_in_place(logical_id, spec, previous)
        resource_event(rm, logical_id, "UPDATE_COMPLETE")
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
            retained = spec.get("DeletionPolicy") in RETAINED_ON_DELETE
            _delete(rm, logical_id, self.old_parsed[logical_id], spec, retained)
        for step in self.steps:
            if step.kind == "replaced":
                spec = self.old_specs[step.logical_id]
                retained = spec.get("UpdateReplacePolicy") == "Retain"
                _delete(rm, step.logical_id, step.previous, spec, retained)

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
                    # Kept: a new resource whose DeletionPolicy is Retain (RetainExceptOnCreate: deleted when
                    # its creation is rolled back), a replacement whose UpdateReplacePolicy is.
                    spec = self.specs[step.logical_id]
                    policy = "UpdateReplacePolicy" if step.kind == "replaced" else "DeletionPolicy"
                    _delete(rm, step.logical_id, created[step.logical_id], spec, spec.get(policy) == "Retain")
            except Exception as error:
                failures.append(f"{step.logical_id}: {error}")
        return failures


def _delete(resources: Any, logical_id: str, resource: Any, spec: dict[str, Any], retained: bool) -> Any:
    """Delete one resource of ``resources`` (moto's ResourceMap) with its stack events, or skip it when its
    policy retains it; returns the error of a deletion that failed (CloudFormation: DELETE_FAILED)."""
    name, event = getattr(resource, "physical_resource_id", resource), {"spec": spec, "resource": resource}
    if retained:
        log.info("kept %s (%s): its policy retains it", name, spec.get("Type"))
        resource_event(resources, logical_id, "DELETE_SKIPPED", **event)
        return None
    resource_event(resources, logical_id, "DELETE_IN_PROGRESS", **event)
    try:
        resources._delete_resource(resource, spec)
    except Exception as error:
        log.warning("could not delete %s (%s): %s", name, spec.get("Type"), error)
        resource_event(resources, logical_id, "DELETE_FAILED", _reason(error), **event)
        return error
    resource_event(resources, logical_id, "DELETE_COMPLETE", **event)
    return None


def delete(resources: Any) -> None:
    """``ResourceMap.delete`` (DeleteStack) as CloudFormation does it: each resource after every resource that
    refers to it, except those ``DeletionPolicy`` keeps. Moto tries them in any order and again while fewer
    remain, so a resource it cannot delete before another (a route before its table) stops the deletion."""
    specs = resources._resource_json_map
    failures = []
    for logical_id in reversed(dependency_order(specs)):
        spec, resource = specs[logical_id], resources._parsed_resources.get(logical_id)
        if resource is None or isinstance(resource, str):
            continue
        retained = spec.get("DeletionPolicy") in RETAINED_ON_DELETE
        failure = _delete(resources, logical_id, resource, spec, retained)
        if failure is not None:
            failures.append(failure)  # CloudFormation: DELETE_FAILED, and the stack too
        elif not retained:
            resources._parsed_resources.pop(logical_id)
    if failures:
        raise failures[0]


def update(resources: Any, template: dict[str, Any], parameters: dict[str, Any] | None = None) -> None:
    """``ResourceMap.update`` as CloudFormation does it (see the module docstring)."""
    StackUpdate(resources, template, parameters).run()


def roll_back_stack(stack: Any, failure: UpdateFailed, *, creating: bool) -> None:
    """Record a rolled-back operation on ``stack`` as CloudFormation does: the resource's ``*_FAILED``
    event with the reason, then ``[UPDATE_]ROLLBACK_IN_PROGRESS`` and ``..._COMPLETE`` (``..._FAILED`` when
    something could not be undone), which is also the stack's status."""
    prefix = "" if creating else "UPDATE_"
    append_event(
        stack, failure.logical_id, "", failure.resource_type, f"{failure.action}_FAILED", failure.reason
    )
    operation = "create" if creating else "update"
    reason = f"The following resource(s) failed to {operation}: [{failure.logical_id}]. {failure.reason}"
    stack._add_stack_event(f"{prefix}ROLLBACK_IN_PROGRESS", resource_status_reason=reason)
    final = f"{prefix}ROLLBACK_{'FAILED' if failure.rollback_failures else 'COMPLETE'}"
    stack._add_stack_event(final, resource_status_reason="; ".join(failure.rollback_failures) or None)
    stack.status, stack.status_reason = final, reason
    log.warning("stack %s: %s (%s)", stack.name, reason, final)


def record_notes(stack: Any) -> None:
    """The notes of the update that just succeeded, as ``UPDATE_COMPLETE`` events of their resources."""
    for logical_id, kind, note in getattr(stack.resource_map, "emulator_notes", []):
        physical = getattr(stack.resource_map._parsed_resources.get(logical_id), "physical_resource_id", "")
        append_event(stack, logical_id, physical, kind, "UPDATE_COMPLETE", NOTE_PREFIX + note)
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
