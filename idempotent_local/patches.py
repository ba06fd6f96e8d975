"""Named changes to moto's behaviour, each small, each for the moto version it was written against.

Every patch (``@patch(NAME)``, collected in :data:`PATCHES`) says in its docstring what AWS does that moto
(``moto_version``) does not, so it can be checked against a newer moto and proposed upstream one by one.
:func:`apply` (the emulator's install step, in the process that serves the emulator) applies all of them;
applying twice replaces, never stacks. With a moto other than ``moto_version`` each patch still applies, and
the emulator's log says which ones to re-check.

The CloudFormation *types* the emulator is taught live in :mod:`idempotent_local.cloudformation`; this module
changes behaviour that is not a resource type. Both are services of the emulator (:data:`SERVICE`, listed in
:mod:`idempotent_local.server`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import inspect
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from idempotent_local.extra import require_moto

require_moto()

# ruff: noqa: E402 (moto is imported once the check above has explained what is missing)
from moto import backends
from moto.awslambda.exceptions import InvalidParameterValueException
from moto.awslambda.models import EventSourceMapping, LambdaBackend, LambdaFunction
from moto.cloudformation import parsing
from moto.cloudformation.exceptions import CloudFormationError
from moto.cloudformation.models import ChangeSet, CloudFormationBackend, Stack
from moto.cloudformation.responses import CloudFormationResponse
from moto.core.responses import ActionResult, EmptyResult
from moto.dynamodb.exceptions import MockValidationException
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.table import StreamRecord, Table
from moto.dynamodbstreams.models import DynamoDBStreamsBackend, ShardIterator
from moto.sns.models import Subscription
from moto.sns.models import Topic as MotoTopic
from moto.sqs import models as sqs_models
from moto.sqs.exceptions import SQSException
from moto.sqs.models import Queue, SQSBackend, sqs_backends
from moto.sqs.responses import SQSResponse

from idempotent_local import (
    control,
    durable_functions,
    dynamodb_streams,
    event_filter,
    message_move_tasks,
    queue_index,
)
from idempotent_local.clock import CLOCK
from idempotent_local.cloudformation import _moto_types, _updates, _validation
from idempotent_local.cloudformation._updates import REPLACING_PROPERTIES
from idempotent_local.emulator import Service

log = logging.getLogger(__name__)

MOTO_VERSION = "5.2.5"


@dataclass(frozen=True)
class Patch:
    """One behaviour of AWS that moto ``moto_version`` lacks (``fixes``), and the function that adds it."""

    name: str
    fixes: str
    apply: Callable[[str | None], None]  # called with the emulator's endpoint (None before it is known)
    moto_version: str = MOTO_VERSION
    ages: str = ""  # what the emulator's clock makes older for this patch (idempotent_local.clock)


PATCHES: list[Patch] = []  # every patch, in the order they are applied: the order they are defined below


def patch(name: str, *, ages: str = "", moto_version: str = MOTO_VERSION) -> Callable[[Any], Any]:
    """Register the function below as the patch ``name``; its docstring says what it fixes."""

    def register(apply: Callable[[str | None], None]) -> Callable[[str | None], None]:
        PATCHES.append(Patch(name, inspect.cleandoc(apply.__doc__ or ""), apply, moto_version, ages))
        return apply

    return register


# The originals of everything replaced, so that applying again wraps the original, not the last patch.
_ORIGINALS: dict[tuple[Any, str], Any] = {}


def _replace(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    """Set ``owner.name`` to ``make(original)``; the original is the one found before the first patch."""
    key = (owner, name)
    if key not in _ORIGINALS:
        _ORIGINALS[key] = vars(owner).get(name)
    setattr(owner, name, make(_ORIGINALS[key]))


def _around(owner: Any, name: str) -> Callable[[Callable[..., Any]], Any]:
    """Replace the function or method ``owner.name`` with the decorated one, which gets moto's own (the
    original, see :func:`_replace`) as its first argument: ``def name(original, self, ...)``."""

    def decorate(around: Callable[..., Any]) -> Any:
        def make(original: Any) -> Any:
            @functools.wraps(original)
            def replaced(*args: Any, **kwargs: Any) -> Any:
                return around(original, *args, **kwargs)

            return replaced

        _replace(owner, name, make)
        return around

    return decorate


# --- CloudFormation -------------------------------------------------------------------------------------


class ChangeSetNotFound(CloudFormationError):
    code = "ChangeSetNotFound"


def _change_set_of_stack(response: Any, missing_ok: bool = False) -> tuple[str | None, Any]:
    """The change set a request names, looked up within its stack (moto looks across all stacks); a missing
    one is ChangeSetNotFound, or ``(None, None)`` when ``missing_ok``."""
    name = response._get_param("ChangeSetName")
    stack = response._get_param("StackName")
    change_sets = response.cloudformation_backend.change_sets
    if name in change_sets:
        return name, change_sets[name]
    for key, change_set in change_sets.items():
        if change_set.change_set_name == name and (
            not stack or stack in (change_set.stack_name, change_set.stack_id)
        ):
            return key, change_set
    if missing_ok:
        return None, None
    raise ChangeSetNotFound(f"ChangeSet [{name}] does not exist")


@patch("change-sets-per-stack")
def _change_sets_per_stack(endpoint: str | None) -> None:
    """A change set is looked up within the stack the request names, a missing one is ChangeSetNotFound (moto
    searches every stack and answers ValidationError, failing every CDK redeploy)"""

    def describe_change_set(self: Any) -> Any:
        return ActionResult(_change_set_of_stack(self)[1])

    def delete_change_set(self: Any) -> Any:
        # CloudFormation: deleting a change set that does not exist succeeds (the CDK CLI relies on it).
        key, _ = _change_set_of_stack(self, missing_ok=True)
        if key is not None:
            del self.cloudformation_backend.change_sets[key]
        return EmptyResult()

    def execute_change_set(self: Any) -> Any:
        key, _ = _change_set_of_stack(self)
        self.cloudformation_backend.execute_change_set(
            change_set_name=key, stack_name=self._get_param("StackName")
        )
        return EmptyResult()

    _replace(CloudFormationResponse, "describe_change_set", lambda _: describe_change_set)
    _replace(CloudFormationResponse, "delete_change_set", lambda _: delete_change_set)
    _replace(CloudFormationResponse, "execute_change_set", lambda _: execute_change_set)


def _resolved_at_deploy_time(value: Any) -> bool:
    if isinstance(value, dict):
        return any(
            k == "Ref" or k.startswith("Fn::") or _resolved_at_deploy_time(v) for k, v in value.items()
        )
    if isinstance(value, list):
        return any(_resolved_at_deploy_time(v) for v in value)
    return False


def resource_change_details(resource_type: str, before: dict[str, Any], after: dict[str, Any]) -> list[dict]:
    """``ResourceChange.Details`` of a modified resource: one entry per top-level property that changed."""
    old, new = before.get("Properties") or {}, after.get("Properties") or {}
    replacing = REPLACING_PROPERTIES.get(resource_type, frozenset())
    details = []
    for name in sorted(set(old) | set(new)):
        if old.get(name) == new.get(name):
            continue
        dynamic = _resolved_at_deploy_time(old.get(name)) or _resolved_at_deploy_time(new.get(name))
        details.append(
            {
                "Target": {
                    "Attribute": "Properties",
                    "Name": name,
                    "RequiresRecreation": "Always" if name in replacing else "Never",
                },
                "Evaluation": "Dynamic" if dynamic else "Static",
                "ChangeSource": "DirectModification",
            }
        )
    return details


@patch("change-set-details")
def _change_set_details(endpoint: str | None) -> None:
    """A change set lists, per modified resource, the properties that change and whether each replaces it
    (Details, Replacement, Scope); without them `cdk diff` prints 'There were no differences'"""

    @_around(ChangeSet, "diff")
    def diff(original: Any, self: Any) -> Any:
        changes = original(self)
        resource_map = self.stack.resource_map
        before = getattr(resource_map, "_resource_json_map", {}) or {}
        after = (self.template_dict or {}).get("Resources", {})
        for change in changes:
            parsed = resource_map._parsed_resources.get(change.logical_resource_id)
            physical = getattr(parsed, "physical_resource_id", None)
            if change.action != "Add" and isinstance(physical, str):
                change.physical_resource_id = physical
            if change.action != "Modify":
                continue
            details = resource_change_details(
                change.resource_type,
                before.get(change.logical_resource_id, {}),
                after.get(change.logical_resource_id, {}),
            )
            change.details = details
            change.scope = ["Properties"] if details else []
            replaces = any(d["Target"]["RequiresRecreation"] == "Always" for d in details)
            change.replacement = "True" if replaces else "False"
        return changes


@patch("ssm-parameter-kept")
def _ssm_parameter_kept(endpoint: str | None) -> None:
    """An SSM-typed parameter kept with UsePreviousValue (the CDK CLI's BootstrapVersion on every update) is
    not looked up again as a parameter name"""

    @_around(parsing.ResourceMap, "parse_ssm_parameter")
    def parse_ssm_parameter(original: Any, self: Any, value: str, value_type: str) -> Any:
        from moto.ssm import ssm_backends

        backend = ssm_backends[self._account_id][self._region_name]
        if backend.get_parameter(value) is None and not value.startswith("/"):
            return value.split(",") if value_type.find("List") > 0 else value
        return original(self, value, value_type)


@patch("stack-events")
def _stack_events(endpoint: str | None) -> None:
    """A stack's events are CloudFormation's: each operation (create, update, delete, rollback) has its own
    OperationId, its first event says User Initiated, and each resource it creates, updates, replaces or
    deletes has its *_IN_PROGRESS and *_COMPLETE events (moto writes a change set's UPDATE_IN_PROGRESS without
    a reason, no OperationId and no resource events, so `cdk deploy` printed the reasons of earlier failed
    deploys beside the current one)"""
    from moto.cloudformation.models import Event

    _replace(Stack, "_add_stack_event", _updates.stack_event)
    _replace(Event, "__init__", _updates.event_operation)


@patch("stack-updates")
def _stack_updates(endpoint: str | None) -> None:
    """An update changes resources in dependency order (a resource referring to a replaced one is updated
    too), gives a replacement a new generated name, refuses to replace a custom-named resource, deletes
    dropped and replaced resources only once everything else succeeded and keeps those their DeletionPolicy /
    UpdateReplacePolicy retains, keeps a resource whose type moto cannot update, and rolls back on a failure
    (UPDATE_ROLLBACK_COMPLETE); moto deletes first, keeps a dropped resource's record (adding it back creates
    nothing), never rolls back, and leaves dependents pointing at replaced resources"""
    _replace(parsing.ResourceMap, "update", _always(_updates.update))
    _replace(Stack, "update", _updates.stack_update)
    _replace(CloudFormationBackend, "execute_change_set", _updates.change_set_execution)


@patch("templates-checked")
def _templates_checked(endpoint: str | None) -> None:
    """CreateStack, UpdateStack and CreateChangeSet refuse a template whose Fn::GetAtt names an attribute its
    resource type does not have, or whose resources depend on each other in a cycle, with a ValidationError
    (moto creates the stack, and DescribeStacks then fails for every stack)"""
    for name in ("create_stack", "update_stack", "create_change_set"):
        _replace(CloudFormationBackend, name, _validation.checked)


@patch("skipped-types")
def _skipped_types(endpoint: str | None) -> None:
    """A resource of a type the emulator does not create — one moto does not know, or a custom resource, whose
    provider function would have to run during the deploy — is left out, and what reads its Fn::GetAtt is
    created without the value; `local deploy` names both (moto invokes a custom resource's function in Docker
    and waits for its answer, so without Docker the stack stays CREATE_IN_PROGRESS and `cdk deploy` never
    returns; a Fn::GetAtt of a left-out resource fails the stack)"""

    @_around(parsing, "resource_class_from_type")
    def resource_class_from_type(original: Any, kind: str) -> Any:
        custom = kind.startswith("Custom::") or kind == "AWS::CloudFormation::CustomResource"
        return None if custom else original(kind)

    def left_out(value: Any, resources: dict[str, Any]) -> bool:
        """Whether ``value`` is a ``Fn::GetAtt`` of a resource the emulator leaves out."""
        if not isinstance(value, dict) or "Fn::GetAtt" not in value:
            return False
        target = value["Fn::GetAtt"]
        spec = resources.get(target.split(".", 1)[0] if isinstance(target, str) else target[0])
        return isinstance(spec, dict) and parsing.resource_class_from_type(spec.get("Type", "")) is None

    @_around(parsing, "clean_json")
    def clean_json(original: Any, resource_json: Any, resources_map: Any) -> Any:
        if left_out(resource_json, getattr(resources_map, "_resource_json_map", {})):
            return None  # what reads it is created without the value
        return original(resource_json, resources_map)

    @_around(parsing.ResourceMap, "validate_outputs")
    def validate_outputs(original: Any, self: Any) -> None:
        # moto checks an output's Fn::GetAtt against the type's class, which a left-out type lacks
        template, outputs = self._template, self._template.get("Outputs") or {}
        kept = {k: v for k, v in outputs.items() if not left_out(v.get("Value"), self._resource_json_map)}
        self._template = {**template, "Outputs": kept}
        try:
            original(self)
        finally:
            self._template = template


@patch("stack-deletion-order")
def _stack_deletion_order(endpoint: str | None) -> None:
    """DeleteStack deletes each resource after those that refer to it, and keeps every resource whose
    DeletionPolicy retains it (moto tries them in any order, so a route deleted after its table fails the
    deletion, and deletes a RetainExceptOnCreate resource)"""
    _replace(parsing.ResourceMap, "delete", _always(_updates.delete))


@patch("moto-types-deployable")
def _moto_types_deployable(endpoint: str | None) -> None:
    """Every type moto's CloudFormation lists deploys and deletes: properties CloudFormation treats as
    optional get its defaults (moto fails with a KeyError, or an SSM parameter without a Name with 'NoneType'
    object has no attribute 'lower'), each resource has the physical id Ref returns (moto leaves 19 types
    without one, so the stack cannot delete them), and route tables can be deleted. See
    :mod:`idempotent_local.cloudformation._moto_types`."""
    _moto_types.install(_replace)


# --- DynamoDB -------------------------------------------------------------------------------------------


@patch("ttl-moves-refused")
def _ttl_moves_refused(endpoint: str | None) -> None:
    """UpdateTimeToLive refuses to enable TTL on another attribute while it is enabled on one (moto moves it),
    so a stack update that moves it fails and rolls back, as in AWS"""

    @_around(DynamoDBBackend, "update_time_to_live")
    def update_time_to_live(original: Any, self: Any, table_name: str, ttl_spec: dict[str, Any]) -> None:
        try:
            current = self.get_table(table_name).ttl
        except Exception:  # moto's own answer for a table that does not exist
            return original(self, table_name, ttl_spec)
        if (
            current.get("TimeToLiveStatus") == "ENABLED"
            and ttl_spec.get("Enabled")
            and ttl_spec.get("AttributeName") != current.get("AttributeName")
        ):
            raise MockValidationException(
                "TimeToLive is active on a different AttributeName: current AttributeName is "
                f"{current.get('AttributeName')}"
            )
        return original(self, table_name, ttl_spec)


# --- Lambda ---------------------------------------------------------------------------------------------


@patch("event-source-mappings-not-invoked")
def _event_source_mappings_not_invoked(endpoint: str | None) -> None:
    """An SQS or DynamoDB stream event source mapping does not make moto invoke the function (moto needs
    Docker for that, and consumes the messages, or empties the stream, anyway); the event-source runner is the
    one poller"""

    @_around(LambdaBackend, "create_event_source_mapping")
    def create_event_source_mapping(original: Any, self: Any, spec: dict[str, Any]) -> Any:
        esm = original(self, spec)
        for queue in sqs_backends[self.account_id][self.region_name].queues.values():
            queue.lambda_event_source_mappings.pop(esm.function_arn, None)
        for table in dynamodb_backends[self.account_id][self.region_name].tables.values():
            table.lambda_event_source_mappings.pop(esm.function_arn, None)
        return esm


def _checked_filter_criteria(spec: dict[str, Any]) -> None:
    """Lambda refuses a mapping whose ``FilterCriteria`` holds a pattern it cannot use."""
    criteria = spec.get("FilterCriteria")
    if criteria is None:
        return
    filters = criteria.get("Filters", []) if isinstance(criteria, dict) else None
    if not isinstance(filters, list) or not all(isinstance(f, dict) for f in filters):
        raise InvalidParameterValueException(f"Invalid FilterCriteria: {criteria!r}")
    for each in filters:
        try:
            event_filter.compile_pattern(str(each.get("Pattern", "")))
        except event_filter.InvalidPattern as invalid:
            raise InvalidParameterValueException(f"Invalid filter pattern definition. ({invalid})") from None


@patch("event-source-mapping-filters-checked")
def _event_source_mapping_filters_checked(endpoint: str | None) -> None:
    """CreateEventSourceMapping and UpdateEventSourceMapping refuse a FilterCriteria pattern Lambda refuses
    (InvalidParameterValueException), and an empty FilterCriteria removes the filters (moto stores anything,
    and keeps an empty one)"""

    @_around(EventSourceMapping, "__init__")
    def __init__(original: Any, self: Any, spec: dict[str, Any]) -> None:
        _checked_filter_criteria(spec)
        original(self, spec)
        self.filter_criteria = spec.get("FilterCriteria") or None

    @_around(LambdaBackend, "update_event_source_mapping")
    def update_event_source_mapping(original: Any, self: Any, uuid: str, spec: dict[str, Any]) -> Any:
        _checked_filter_criteria(spec)
        esm = original(self, uuid, spec)
        if esm is not None and not (esm.filter_criteria or {}).get("Filters"):
            esm.filter_criteria = None  # `--filter-criteria '{}'` removes the filters
        return esm


@patch("event-source-mapping-last-modified")
def _event_source_mapping_last_modified(endpoint: str | None) -> None:
    """An event source mapping's LastModified is the time it was created or last updated (moto reads UTC wall
    time as local time: hours off outside UTC, which would move where a LATEST stream mapping starts)"""

    # Whatever moto assigns, the mapping keeps the time of the assignment.
    def stamp(self: Any, value: float) -> None:
        vars(self)["_last_modified_at"] = time.time()

    def stamped(self: Any) -> float:
        return float(vars(self).get("_last_modified_at", 0.0))

    _replace(EventSourceMapping, "last_modified", lambda original: property(stamped, stamp))


@patch("lambda-durable-executions")
def _durable_executions(endpoint: str | None) -> None:
    """A function keeps its DurableConfig; Invoke of a durable function (qualified only) starts one durable
    execution per DurableExecutionName - the same name and payload return it, another payload is
    DurableExecutionAlreadyStartedException - and runs its handler once per execution; GetDurableExecution and
    ListDurableExecutionsByFunction (one version at a time) read them, ListVersionsByFunction takes an ARN
    (moto drops DurableConfig, ignores the name, needs Docker to invoke and lists no version of an ARN). See
    :mod:`idempotent_local.durable_functions`."""
    durable_functions.install(endpoint, _replace)


@patch("code-location-served")
def _code_location_served(endpoint: str | None) -> None:
    """GetFunction returns a Code.Location that downloads the deployed zip (from the emulator's S3, or, for
    inline code, from its control API; moto: an awslambda-REGION-tasks URL that leads nowhere)"""
    if not endpoint:
        return

    @_around(LambdaFunction, "get_code")
    def get_code(original: Any, self: Any) -> dict[str, Any]:
        response = original(self)
        if "Code" not in response:
            return response  # an image
        if "S3Bucket" in self.code and "S3Key" in self.code:
            response["Code"]["Location"] = f"{endpoint}/{self.code['S3Bucket']}/{self.code['S3Key']}"
        elif "ZipFile" in self.code:  # inline code (CloudFormation's Code.ZipFile): kept by moto alone
            response["Code"]["Location"] = control.code_location(endpoint, self.function_arn)
        return response


# --- DynamoDB -------------------------------------------------------------------------------------------

_DYNAMODB_WRITES = threading.RLock()


@patch("dynamodb-atomic-writes")
def _dynamodb_atomic_writes(endpoint: str | None) -> None:
    """A conditional write (PutItem, UpdateItem, DeleteItem, TransactWriteItems) is atomic: two writes of one
    key at the same time cannot both pass their condition (moto checks, then writes, without a lock, and its
    server runs requests on many threads)"""

    for name in ("put_item", "update_item", "delete_item", "transact_write_items"):

        @_around(DynamoDBBackend, name)
        def write(original: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
            with _DYNAMODB_WRITES:
                return original(self, *args, **kwargs)


# --- DynamoDB Streams -----------------------------------------------------------------------------------


@patch(
    "stream-disable-and-re-enable",
    ages="DynamoDB stream records (a record leaves its stream 24 h after it was written, a closed stream "
    "24 h after it closed)",
)
def _stream_disable_and_re_enable(endpoint: str | None) -> None:
    """Disabling a table's stream closes it (DISABLED, an EndingSequenceNumber, no more records, still
    readable; a closed shard read to its end gives no NextShardIterator) and enabling it again creates a new
    stream with a new ARN and shard; a closed stream stays listed and readable 24 hours and a record stays in
    its stream 24 hours by the emulator's clock, which a test can move ahead (moto keeps recording into the
    one shard, says ENABLED, refuses to enable again, gives every stream the same shard id, lists only the
    latest stream, and keeps records as long as the table). See :mod:`idempotent_local.dynamodb_streams`."""
    _replace(Table, "set_stream_specification", _always(dynamodb_streams.set_stream_specification))
    _replace(DynamoDBBackend, "update_table_streams", _always(dynamodb_streams.update_table_streams))
    _replace(DynamoDBStreamsBackend, "describe_stream", _always(dynamodb_streams.describe_stream))
    _replace(DynamoDBStreamsBackend, "get_shard_iterator", _always(dynamodb_streams.get_shard_iterator))
    _around(ShardIterator, "get")(dynamodb_streams.records_get)
    _replace(DynamoDBStreamsBackend, "list_streams", _always(dynamodb_streams.list_streams))


@patch("stream-record-fields")
def _stream_record_fields(endpoint: str | None) -> None:
    """A stream record has eventVersion 1.1 and its table's region as awsRegion (moto: 1.0, us-east-1)"""

    _around(StreamRecord, "__init__")(dynamodb_streams.record_fields)


# --- SNS ------------------------------------------------------------------------------------------------


@patch("topic-content-based-deduplication")
def _topic_content_based_deduplication(endpoint: str | None) -> None:
    """A FIFO topic with content-based deduplication hands its subscribed queues a deduplication id (the
    SHA-256 of the body), as SNS does"""

    @_around(MotoTopic, "publish")
    def publish(original: Any, self: Any, message: str, *args: Any, **kwargs: Any) -> str:
        if (
            self.fifo_topic
            and str(self.content_based_deduplication).lower() == "true"
            and not kwargs.get("deduplication_id")
        ):
            kwargs["deduplication_id"] = hashlib.sha256(message.encode()).hexdigest()
        return original(self, message, *args, **kwargs)


MAX_SQS_MESSAGE_ATTRIBUTES = 10


class DeliveryFailed(Exception):
    """SNS could not deliver to the subscribed queue: ``code`` and ``message`` as SQS answered."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


def _sqs_attributes(message_attributes: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """SNS's ``{"Type", "Value"}`` message attributes as SQS message attributes (raw delivery)."""
    converted = {}
    for key, value in (message_attributes or {}).items():
        kind = "BinaryValue" if value["Type"].startswith("Binary") else "StringValue"
        converted[key] = {
            "DataType": value["Type"],
            kind: value["Value"] if kind == "BinaryValue" else str(value["Value"]),
        }
    return converted


@patch("subscription-delivery")
def _subscription_delivery(endpoint: str | None) -> None:
    """A message SNS cannot deliver to a subscribed queue (queue gone, more than 10 message attributes with
    raw delivery, any refusal by SQS) goes to the subscription's redrive-policy DLQ with
    ErrorCode/ErrorMessage/RequestID attributes, or is dropped without one; the publisher never sees the
    failure (moto fails the Publish call, or delivers what SQS would refuse)"""

    @_around(Subscription, "publish")
    def publish(original: Any, self: Any, message: str, message_id: str, **published: Any) -> None:
        if self.protocol != "sqs":
            return original(self, message, message_id, **published)
        subject, message_attributes = published.get("subject"), published.get("message_attributes")
        group_id, deduplication_id = published.get("group_id"), published.get("deduplication_id")
        if self._filter_policy_matcher is not None and not self._filter_policy_matcher.matches(
            message_attributes, message
        ):
            return None
        if published.get("message_structure") == "json":
            message = self._parse_message_structure(message, self.protocol)
        raw = str(self.attributes.get("RawMessageDelivery", "false")).lower() == "true"
        if raw:
            body, attributes = message, _sqs_attributes(message_attributes)
        else:
            envelope = self.get_post_data(message, message_id, subject, message_attributes=message_attributes)
            body = json.dumps(envelope, sort_keys=True, indent=2, separators=(",", ": "))
            attributes = {}
        try:
            _deliver(self.endpoint, body, attributes, group_id=group_id, deduplication_id=deduplication_id)
        except DeliveryFailed as failure:
            _to_subscription_dead_letter_queue(self, message_id, body, attributes, group_id, failure)
        return None


def _deliver(queue_arn: str, body: str, attributes: dict[str, dict[str, Any]], **ids: Any) -> None:
    """Send ``body`` to the queue as SNS delivers (``ids``: its group and deduplication ids, the group id not
    checked); :class:`DeliveryFailed` with SQS's answer when the queue refuses it or is gone."""
    _, _, _, region, account, queue = queue_arn.split(":", 5)
    backend = sqs_backends[account][region]
    if queue not in backend.queues:
        raise DeliveryFailed("AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.")
    if len(attributes) > MAX_SQS_MESSAGE_ATTRIBUTES:
        raise DeliveryFailed(
            "InvalidParameterValue",
            f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum "
            f"[{MAX_SQS_MESSAGE_ATTRIBUTES}].",
        )
    try:
        backend.send_message(queue, body, message_attributes=attributes, validate_group_id=False, **ids)
    except SQSException as exc:
        raise DeliveryFailed(exc.code, exc.message) from exc


def _to_subscription_dead_letter_queue(
    subscription: Any,
    message_id: str,
    body: str,
    attributes: dict[str, dict[str, Any]],
    group_id: str | None,
    failure: DeliveryFailed,
) -> None:
    """What SNS does with an undeliverable message: into the subscription's DLQ, or dropped without one."""
    policy = subscription.attributes.get("RedrivePolicy")
    target = json.loads(policy).get("deadLetterTargetArn") if policy else None
    if not target:
        log.warning(
            "sns dropped message %s of %s: delivery to %s failed (%s) and the subscription has no redrive "
            "policy",
            message_id,
            subscription.topic_arn,
            subscription.endpoint,
            failure,
        )
        return
    error = {
        "RequestID": {"DataType": "String", "StringValue": str(uuid.uuid4())},
        "ErrorCode": {"DataType": "String", "StringValue": failure.code},
        "ErrorMessage": {"DataType": "String", "StringValue": failure.message},
    }
    # The original attributes as far as they fit beside the three SNS adds.
    kept = dict(list(attributes.items())[: MAX_SQS_MESSAGE_ATTRIBUTES - len(error)])
    deduplication_id = message_id if target.endswith(".fifo") else None
    try:
        _deliver(target, body, {**kept, **error}, group_id=group_id, deduplication_id=deduplication_id)
    except DeliveryFailed as exc:
        log.warning(
            "sns dropped message %s: its subscription DLQ %s refused it (%s)", message_id, target, exc
        )


# --- SQS ------------------------------------------------------------------------------------------------


@patch("fifo-group-order")
def _fifo_group_order(endpoint: str | None) -> None:
    """After a failed or expired receive, a FIFO message group is delivered again from its first message (moto
    hands out a later message of the group first)"""

    def pending_message_groups(self: Any) -> set[str]:
        # A message whose visibility timeout ran out is no longer in flight: it must not block its group.
        # Moto releases such a message only when its receive loop reaches it, after it has already passed
        # over (and skipped) the earlier messages of the group, so a later message went out first.
        pending = self._pending_messages
        for message in [m for m in pending if m.visible]:
            pending.discard(message)
        return {m.group_id for m in pending if m.group_id is not None}

    _replace(Queue, "pending_message_groups", lambda _: property(pending_message_groups))


DEDUPLICATION_SECONDS = 300  # SQS: the deduplication interval of a FIFO queue
_DEDUPLICATION_LOCK = threading.Lock()


@patch(
    "fifo-deduplication",
    ages="FIFO deduplication ids (an SQS FIFO queue, and so an SNS FIFO topic delivering to it, drops a "
    "repeated id only within 5 minutes of its first send)",
)
def _fifo_deduplication(endpoint: str | None) -> None:
    """A FIFO queue remembers each deduplication id for 5 minutes from its first send, "even after the
    message has been received and deleted", and answers a send it drops with the *earlier* message's id
    (AWS: "Using the message deduplication ID", SendMessage); with ``DeduplicationScope=messageGroup``, within
    the message group. moto compares only with messages still in the queue (of any group) and answers a
    dropped send with a new id, so a producer retry after the consumer deleted the
    original went through, and a tool could not tell that SQS dropped its send."""
    from moto.sqs import models
    from moto.sqs.models import Message

    # This patch decides alone: moto's own check (messages still in the queue, any group) is off.
    _replace(models, "DEDUPLICATION_TIME_IN_SECONDS", lambda _: 0)

    @_around(SQSBackend, "send_message")
    def send_message(original: Any, self: Any, queue_name: str, message_body: str, **sent: Any) -> Any:
        def send() -> Any:
            return original(self, queue_name, message_body, **sent)

        deduplication_id, group_id = sent.get("deduplication_id"), sent.get("group_id")
        queue = self.get_queue(queue_name)
        if not queue.fifo_queue:
            return send()
        key = deduplication_id
        if key is None and queue.content_based_deduplication:
            key = hashlib.sha256(message_body.encode("utf-8")).hexdigest()
        if key is None:
            return send()  # moto's own checks answer a FIFO send without a deduplication id
        if queue.deduplication_scope == "messageGroup":
            key = f"{group_id}\n{key}"  # high-throughput FIFO: deduplicated within the group only
        with _DEDUPLICATION_LOCK:
            # Oldest first (a dict keeps insertion order): expiring the window stops at the first id
            # still in it, so a send costs the same with 10 or 10,000 ids remembered.
            seen: dict[str, tuple[float, Any]] = vars(queue).setdefault("_deduplication_ids", {})
            now = CLOCK.now()
            while seen:
                oldest, (at, _) = next(iter(seen.items()))
                if now - at < DEDUPLICATION_SECONDS:
                    break
                del seen[oldest]
            if key in seen:
                self._validate_message(
                    queue,
                    message_body=message_body,
                    delay_seconds=int(sent.get("delay_seconds") or 0),
                    deduplication_id=deduplication_id,
                    group_id=group_id,
                    validate_group_id=sent.get("validate_group_id", True),
                )
                earlier = seen[key][1]
                answer = Message(earlier.id, message_body, sent.get("system_attributes"))
                answer.message_attributes = sent.get("message_attributes") or {}
                answer.sequence_number = earlier.sequence_number
                return answer  # accepted, not enqueued
            message = send()
            seen[key] = (now, message)
            return message


@patch("dead-letter-moves")
def _dead_letter_moves(endpoint: str | None) -> None:
    """A message the redrive policy moves to a dead-letter queue is never deduplicated there, and a FIFO DLQ
    gives it its message id as deduplication id (moto drops a second dead letter with the same deduplication
    id); the source queue is remembered for message move tasks"""

    def move(dead_letter_queue: Any, message: Any, source: Any) -> None:
        message.dead_letter_queue_source_arn = source.queue_arn
        if dead_letter_queue.fifo_queue:
            message.deduplication_id = message.id
        message_move_tasks.append(dead_letter_queue, message)

    # The emulator's receive (queue_index, installed by sqs-depth-independent) makes every redrive move here.
    _replace(queue_index, "move_to_dead_letter_queue", _always(move))


@patch("sqs-depth-independent")
def _sqs_depth_independent(endpoint: str | None) -> None:
    """Each SQS request costs the same whatever the queue's depth: see :mod:`idempotent_local.queue_index`."""

    def count(field: str) -> Any:
        return lambda original: property(lambda queue: getattr(queue_index.counts(queue), field))

    _replace(Queue, "approximate_number_of_messages", count("visible"))
    _replace(Queue, "approximate_number_of_messages_not_visible", count("in_flight"))
    _replace(Queue, "approximate_number_of_messages_delayed", count("delayed"))
    # Queue.attributes turns each attribute name into a Python name, on every read: once is enough.
    _replace(sqs_models, "camelcase_to_underscores", functools.cache)

    @_around(Queue, "add_message")
    def add_message(original: Any, self: Any, message: Any) -> None:
        if self.lambda_event_source_mappings:  # moto invokes the mapped function (never in the emulator)
            original(self, message)
        else:
            queue_index.add_message(self, message)

    _replace(Queue, "delete_message", _always(queue_index.delete_message))

    def receive_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        return queue_index.receive_message(self.get_queue(queue_name), *args, **kwargs)

    def change_message_visibility(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> None:
        queue_index.change_message_visibility(self.get_queue(queue_name), *args, **kwargs)

    @_around(SQSBackend, "purge_queue")
    def purge_queue(original: Any, self: Any, queue_name: str) -> None:
        queue = self.get_queue(queue_name)
        with queue._messages_lock:
            original(self, queue_name)
            queue_index.forget_all(queue)

    _replace(SQSBackend, "receive_message", _always(receive_message))
    _replace(SQSBackend, "change_message_visibility", _always(change_message_visibility))


def _always(value: Any) -> Callable[[Any], Any]:
    """A ``make`` for :func:`_replace` that ignores the original (moto has none for these requests)."""
    return lambda original: value


@patch("message-move-tasks")
def _message_move_tasks(endpoint: str | None) -> None:
    """StartMessageMoveTask, ListMessageMoveTasks and CancelMessageMoveTask work (moto answers HTTP 500)"""
    for name in ("start_message_move_task", "list_message_move_tasks", "cancel_message_move_task"):
        _replace(SQSResponse, name, _always(getattr(message_move_tasks, name)))  # the request handler


# --- S3 -------------------------------------------------------------------------------------------------


@patch("bucket-policy-conditions")
def _bucket_policy_conditions(endpoint: str | None) -> None:
    """A bucket policy's statement with a Condition is not applied by the emulator, which cannot evaluate
    conditions (moto applies it unconditionally: the TLS-only deny of enforce_ssl, also on the CDK bootstrap
    bucket, refuses every object request, the CDK CLI's asset uploads too)"""
    from moto.s3.models import FakeBucket

    def get_permission(self: Any, action: str, resource: str) -> Any:
        from moto.iam.access_control import IAMPolicy, PermissionResult

        if self.policy is None:
            return PermissionResult.NEUTRAL
        document = json.loads(self.policy)
        statements = document.get("Statement") or []
        statements = [statements] if isinstance(statements, dict) else statements
        unconditional = [s for s in statements if "Condition" not in s]
        if not unconditional:
            return PermissionResult.NEUTRAL
        return IAMPolicy(json.dumps({**document, "Statement": unconditional})).is_action_permitted(
            action, resource
        )

    _replace(FakeBucket, "get_permission", _always(get_permission))


# --- the server ---------------------------------------------------------------------------------------


@patch("routing-without-listing")
def _routing_without_listing(endpoint: str | None) -> None:
    """A request reaches its service without moto listing its own package directory first (moto does, on every
    request, one request at a time: about 1 ms each)"""
    # The list cannot change while the server runs.
    _replace(backends, "list_of_moto_modules", lambda original: functools.cache(lambda: tuple(original())))


def apply(endpoint: str | None = None) -> tuple[Patch, ...]:
    """Apply every patch (again: each replaces its previous application). Returns the patches applied."""
    installed = importlib.metadata.version("moto")
    for patch in PATCHES:
        patch.apply(endpoint)
        if installed != patch.moto_version:
            log.warning(
                "patch %s was written for moto %s, this is moto %s: check that it is still needed and right",
                patch.name,
                patch.moto_version,
                installed,
            )
    return tuple(PATCHES)


def revert() -> None:
    """Give this process's moto its own behaviour back (undo every :func:`apply`), for a process that also
    uses plain moto, such as a test run; :func:`apply` patches it again."""
    for (owner, name), original in _ORIGINALS.items():
        if original is not None:
            setattr(owner, name, original)
        elif name in vars(owner):
            delattr(owner, name)  # it was inherited


SERVICE = Service("moto patches", apply, ages=tuple(patch.ages for patch in PATCHES if patch.ages))

__all__ = ["MOTO_VERSION", "PATCHES", "SERVICE", "Patch", "apply", "resource_change_details", "revert"]
