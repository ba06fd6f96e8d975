"""Named changes to moto's behaviour, each small, each for the moto version it was written against.

Every entry of :data:`PATCHES` says what AWS does that moto (``moto_version``) does not, so it can be checked
against a newer moto and proposed upstream one by one. :func:`apply` (the emulator's install step, in the
process that serves the emulator) applies all of them; applying twice replaces, never stacks. With a moto
other than ``moto_version`` each patch still applies, and the emulator's log says which ones to re-check.

The CloudFormation *types* the emulator is taught live in :mod:`idempotent_local.cloudformation` (one
module per type); this module changes behaviour that is not a resource type.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from idempotent_local.extra import require_moto

require_moto()

# ruff: noqa: E402 (moto is imported once the check above has explained what is missing)
from moto.awslambda.models import LambdaBackend, LambdaFunction
from moto.cloudformation import parsing
from moto.cloudformation.exceptions import CloudFormationError
from moto.cloudformation.responses import CloudFormationResponse
from moto.core.responses import ActionResult, EmptyResult
from moto.sns.models import Topic as MotoTopic
from moto.sqs.models import sqs_backends

log = logging.getLogger(__name__)

MOTO_VERSION = "5.2.5"


@dataclass(frozen=True)
class Patch:
    """One behaviour of AWS that moto ``moto_version`` lacks, and the function that adds it."""

    name: str
    fixes: str
    apply: Callable[[str | None], None]  # called with the emulator's endpoint (None before it is known)
    moto_version: str = MOTO_VERSION


# The originals of everything replaced, so that applying again wraps the original, not the last patch.
_ORIGINALS: dict[tuple[Any, str], Any] = {}


def _replace(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    """Set ``owner.name`` to ``make(original)``; the original is the one found before the first patch."""
    key = (owner, name)
    if key not in _ORIGINALS:
        _ORIGINALS[key] = vars(owner).get(name)
    setattr(owner, name, make(_ORIGINALS[key]))


# --- CloudFormation -------------------------------------------------------------------------------------


class ChangeSetNotFound(CloudFormationError):
    code = "ChangeSetNotFound"


def _change_set_of_stack(response: Any) -> tuple[str | None, Any]:
    """The change set a request names, looked up within its stack (moto looks across all stacks)."""
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
    return None, None


def _change_sets_per_stack(endpoint: str | None) -> None:
    def describe_change_set(self: Any) -> Any:
        _, change_set = _change_set_of_stack(self)
        if change_set is None:
            raise ChangeSetNotFound(f"ChangeSet [{self._get_param('ChangeSetName')}] does not exist")
        return ActionResult(change_set)

    def delete_change_set(self: Any) -> Any:
        # CloudFormation: deleting a change set that does not exist succeeds (the CDK CLI relies on it).
        key, _ = _change_set_of_stack(self)
        if key is not None:
            del self.cloudformation_backend.change_sets[key]
        return EmptyResult()

    def execute_change_set(self: Any) -> Any:
        key, change_set = _change_set_of_stack(self)
        if key is None:
            raise ChangeSetNotFound(f"ChangeSet [{self._get_param('ChangeSetName')}] does not exist")
        self.cloudformation_backend.execute_change_set(
            change_set_name=key, stack_name=self._get_param("StackName")
        )
        # Moto keeps the outputs (and description) of the template the stack had before the change set.
        stack = change_set.stack
        stack._parse_template()
        stack.output_map = stack._create_output_map()
        stack.description = stack.template_dict.get("Description")
        return EmptyResult()

    _replace(CloudFormationResponse, "describe_change_set", lambda _: describe_change_set)
    _replace(CloudFormationResponse, "delete_change_set", lambda _: delete_change_set)
    _replace(CloudFormationResponse, "execute_change_set", lambda _: execute_change_set)


def _ssm_parameter_kept(endpoint: str | None) -> None:
    def make(original: Any) -> Any:
        def parse_ssm_parameter(self: Any, value: str, value_type: str) -> Any:
            from moto.ssm import ssm_backends

            backend = ssm_backends[self._account_id][self._region_name]
            if backend.get_parameter(value) is None and not value.startswith("/"):
                return value.split(",") if value_type.find("List") > 0 else value
            return original(self, value, value_type)

        return parse_ssm_parameter

    _replace(parsing.ResourceMap, "parse_ssm_parameter", make)


def _resources_kept_on_update(endpoint: str | None) -> None:
    def make(original: Any) -> Any:
        def parse_and_update_resource(
            logical_id: str,
            resource_json: dict[str, Any],
            resources_map: Any,
            account_id: str,
            region_name: str,
        ) -> Any:
            updated = original(logical_id, resource_json, resources_map, account_id, region_name)
            if updated is None:
                previous = resources_map._parsed_resources.get(logical_id)
                if previous is not None:
                    log.warning(
                        "no update support for %s (%s): kept as it was", logical_id, resource_json.get("Type")
                    )
                    return previous
            return updated

        return parse_and_update_resource

    _replace(parsing, "parse_and_update_resource", make)


# --- Lambda ---------------------------------------------------------------------------------------------


def _event_source_mappings_not_invoked(endpoint: str | None) -> None:
    def make(original: Any) -> Any:
        def create_event_source_mapping(self: Any, spec: dict[str, Any]) -> Any:
            esm = original(self, spec)
            for queue in sqs_backends[self.account_id][self.region_name].queues.values():
                queue.lambda_event_source_mappings.pop(esm.function_arn, None)
            return esm

        return create_event_source_mapping

    _replace(LambdaBackend, "create_event_source_mapping", make)


def _code_location_served(endpoint: str | None) -> None:
    if not endpoint:
        return

    def make(original: Any) -> Any:
        def get_code(self: Any) -> dict[str, Any]:
            response = original(self)
            if "S3Bucket" in self.code and "S3Key" in self.code and "Code" in response:
                response["Code"]["Location"] = f"{endpoint}/{self.code['S3Bucket']}/{self.code['S3Key']}"
            return response

        return get_code

    _replace(LambdaFunction, "get_code", make)


# --- SNS ------------------------------------------------------------------------------------------------


def _topic_content_based_deduplication(endpoint: str | None) -> None:
    def make(original: Any) -> Any:
        def publish(self: Any, message: str, *args: Any, **kwargs: Any) -> str:
            if (
                self.fifo_topic
                and str(self.content_based_deduplication).lower() == "true"
                and not kwargs.get("deduplication_id")
            ):
                kwargs["deduplication_id"] = hashlib.sha256(message.encode()).hexdigest()
            return original(self, message, *args, **kwargs)

        return publish

    _replace(MotoTopic, "publish", make)


PATCHES: tuple[Patch, ...] = (
    Patch(
        "change-sets-per-stack",
        "a change set is looked up within the stack the request names, a missing one is ChangeSetNotFound "
        "(moto searches every stack and answers ValidationError, failing every CDK redeploy), and executing "
        "one refreshes the stack's outputs and description",
        _change_sets_per_stack,
    ),
    Patch(
        "ssm-parameter-kept",
        "an SSM-typed parameter kept with UsePreviousValue (the CDK CLI's BootstrapVersion on every update) "
        "is not looked up again as a parameter name",
        _ssm_parameter_kept,
    ),
    Patch(
        "resources-kept-on-update",
        "a resource whose type moto cannot update keeps its resource (moto loses it, and every Ref to it)",
        _resources_kept_on_update,
    ),
    Patch(
        "event-source-mappings-not-invoked",
        "an SQS event source mapping does not make moto invoke the function (moto needs Docker for that and "
        "consumes the messages anyway); the event-source runner is the one poller",
        _event_source_mappings_not_invoked,
    ),
    Patch(
        "code-location-served",
        "GetFunction returns a Code.Location that downloads the deployed zip (from the emulator's S3)",
        _code_location_served,
    ),
    Patch(
        "topic-content-based-deduplication",
        "a FIFO topic with content-based deduplication hands its subscribed queues a deduplication id (the "
        "SHA-256 of the body), as SNS does",
        _topic_content_based_deduplication,
    ),
)


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
    return PATCHES


__all__ = ["MOTO_VERSION", "PATCHES", "Patch", "apply"]
