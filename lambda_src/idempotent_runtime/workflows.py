"""Start a Step Functions execution exactly once per message key, from a guarded-mode processor::

    from idempotent_runtime.workflows import start_execution_once

    def start_order_workflow(message):
        return start_execution_once(message, os.environ["STATE_MACHINE_ARN"], message.json_object())

The execution's name is the key's (:func:`execution_name`), so Step Functions itself refuses a second
execution for a key for 90 days: a re-run of the processor after its environment died between the start
and the key's completion, or a delivery after the key's record expired, finds the execution and returns its
ARN. Standard workflows only: an Express state machine is refused before anything starts (Step Functions
does not check Express execution names). docs/runtime.md, "Start a workflow exactly once".

Not part of the function's code asset unless your code names it.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from idempotent_runtime.clients import LazyClient
from idempotent_runtime.errors import (
    Conflict,
    Misconfiguration,
    PermanentError,
    TransientError,
    error_code,
    error_text,
    is_retryable,
)
from idempotent_runtime.message import Key, Message, join_key
from idempotent_runtime.payload import canonical_json, parse_json, raw_fingerprint, sha256_hex
from idempotent_runtime.retries import Retrier

__all__ = ["ExecutionConflict", "execution_input", "execution_name", "start_execution_once"]

# Step Functions' execution names: 1-80 characters, none of whitespace, brackets, wildcards, most
# punctuation or control characters; with CloudWatch Logs logging only 0-9, A-Z, a-z, - and _ work. A key
# is written as its name when it fits the narrow set, its parts joined with `_`; otherwise the name is the
# SHA-256 (hex) of the key, as its idempotency key is when that does not fit (64 characters).
NAME_SEPARATOR = "_"
_PLAIN_NAME = re.compile(r"[0-9A-Za-z_-]{1,80}")
# The execution input's limit: 256 KiB of UTF-8 (canonical JSON is ASCII: one byte a character).
MAX_INPUT_BYTES = 262_144
STANDARD = "STANDARD"
# What start_execution_once asks Step Functions, on the state machine and on its executions
# (IdempotentConsumer.grant_start_execution grants exactly these).
STATE_MACHINE_ACTIONS = ("states:StartExecution", "states:DescribeStateMachine")
EXECUTION_ACTIONS = ("states:DescribeExecution",)
# On a state machine's customer managed key, through Step Functions: a start encrypts the input, a describe
# decrypts it.
STATE_MACHINE_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")

# Errors that say the state machine or the function's permissions are wrong, not the message.
_MISCONFIGURED = frozenset(
    {"StateMachineDoesNotExist", "StateMachineDeleting", "InvalidArn", "ResourceNotFound"}
)
# Errors about the request's content: the same message fails the same way every time.
_PERMANENT = frozenset({"InvalidExecutionInput", "InvalidName", "ValidationException"})
_TRANSIENT = frozenset({"ExecutionLimitExceeded", "ExecutionDoesNotExist"})

_client = LazyClient("stepfunctions")
_calls = Retrier()
# State machines seen to be STANDARD by this execution environment (a type cannot change).
_standard: set[str] = set()


class ExecutionConflict(Conflict):
    """An execution named for the key exists with another input: quarantined as a conflict, nothing
    started. ``fingerprint`` / ``stored_fingerprint``: SHA-256 of this input and of the execution's."""

    def __init__(self, key: Key, execution_arn: str, fingerprint: str, stored_fingerprint: str) -> None:
        PermanentError.__init__(
            self,
            f"conflict: execution {execution_arn} of key {key} exists with another input (fingerprint "
            f"{stored_fingerprint}), this message's input fingerprint is {fingerprint}",
        )
        self.key = key
        self.execution_arn = execution_arn
        self.fingerprint = fingerprint
        self.stored_fingerprint = stored_fingerprint


def execution_name(key: Key) -> str:
    """The execution name of ``key``: ``partition_sort`` when both hold only ASCII letters, digits and
    ``-`` and it is ≤ 80 characters, else the SHA-256 (hex) of the key (that of ``key.idempotency_key``'s
    hashed form). The same for the same key, different for different keys, always valid."""
    return join_key((key.partition, key.sort), NAME_SEPARATOR, _PLAIN_NAME)


def execution_input(value: Any) -> str:
    """The text sent as the input: canonical JSON (keys sorted, compact, numbers by value, ASCII escapes),
    so the same value is always the same text, the text Step Functions compares."""
    return canonical_json(value)


def start_execution_once(message: Message, state_machine_arn: str, input: Any, *, client: Any = None) -> str:
    """Start ``state_machine_arn`` (a STANDARD state machine) with ``input`` (a JSON value built from the
    message alone) under the key's :func:`execution_name`, once; returns the execution's ARN - of the
    execution started now, or of the one an earlier run started with the same input, running or closed.

    Raises :class:`ExecutionConflict` when that execution has another input, ``TransientError`` on
    throttling (after retries within the invocation) and while a just-started execution cannot be read
    yet, ``Misconfiguration`` (retried, never quarantined) for an Express or missing state machine or
    missing permissions, ``PermanentError`` for an input Step Functions refuses. ``client``: a
    ``stepfunctions`` client (default: one per execution environment, with the runtime's settings).
    """
    key = message.key
    if key is None:
        raise ValueError("start_execution_once needs the message's key: call it from a processor")
    name = execution_name(key)
    text = execution_input(input)
    if len(text) > MAX_INPUT_BYTES:
        raise PermanentError(
            f"workflow input of key {key} is {len(text)} bytes as JSON, over Step Functions' "
            f"{MAX_INPUT_BYTES}"
        )
    sfn = client if client is not None else _client()
    _require_standard(sfn, state_machine_arn)
    try:
        started = _calls(sfn.start_execution, stateMachineArn=state_machine_arn, name=name, input=text)
    except Exception as exc:
        if error_code(exc) != "ExecutionAlreadyExists":
            _raise_failure(exc, "StartExecution", state_machine_arn)
    else:
        return str(started["executionArn"])
    # Closed (any input), or running with another input: its input decides.
    return _existing(sfn, key, _execution_arn(state_machine_arn, name), text)


def _existing(sfn: Any, key: Key, execution_arn: str, text: str) -> str:
    try:
        described = _calls(sfn.describe_execution, executionArn=execution_arn)
    except Exception as exc:
        _raise_failure(exc, "DescribeExecution", execution_arn)
    stored = described.get("input")
    if not isinstance(stored, str):
        raise Misconfiguration(
            f"DescribeExecution of {execution_arn} returned no input",
            "the function cannot read the execution's input: with a customer managed key on the state "
            "machine it needs kms:Decrypt on that key",
        )
    if stored != text:
        try:
            same = execution_input(parse_json(stored)) == text
        except (ValueError, RecursionError):
            same = False
        if not same:
            ours = sha256_hex(text.encode("ascii"))
            raise ExecutionConflict(key, execution_arn, ours, _fingerprint(stored))
    return str(described["executionArn"])


def _fingerprint(text: str) -> str:
    """The fingerprint of an execution's input: of its canonical JSON, or of its text when not JSON."""
    try:
        return sha256_hex(execution_input(parse_json(text)).encode("ascii"))
    except (ValueError, RecursionError):
        return raw_fingerprint(text)


def _require_standard(sfn: Any, state_machine_arn: str) -> None:
    """Refuse an Express state machine: Step Functions neither checks its execution names nor describes its
    executions, so nothing would stop a second start. Asked once per state machine and environment."""
    unqualified = ":".join(_arn_parts(state_machine_arn)[:7])  # without a version or alias
    if unqualified in _standard:
        return
    try:
        described = _calls(
            sfn.describe_state_machine, stateMachineArn=unqualified, includedData="METADATA_ONLY"
        )
    except Exception as exc:
        _raise_failure(exc, "DescribeStateMachine", unqualified)
    kind = described.get("type", STANDARD)
    if kind != STANDARD:
        raise Misconfiguration(
            f"state machine {unqualified} is {kind}: start_execution_once starts STANDARD workflows only",
            f"state machine {unqualified} is an {kind} workflow, whose execution names Step Functions does "
            "not check: use a STANDARD state machine",
        )
    _standard.add(unqualified)


def _arn_parts(state_machine_arn: str) -> list[str]:
    parts = state_machine_arn.split(":") if isinstance(state_machine_arn, str) else []
    if len(parts) < 7 or parts[2] != "states" or parts[5] != "stateMachine":
        raise Misconfiguration(
            f"{state_machine_arn!r} is not a state machine ARN",
            "start_execution_once takes a state machine's ARN: "
            "arn:aws:states:REGION:ACCOUNT:stateMachine:NAME",
        )
    return parts


def _execution_arn(state_machine_arn: str, name: str) -> str:
    """``arn:PARTITION:states:REGION:ACCOUNT:execution:STATE_MACHINE:NAME``, as Step Functions names a
    STANDARD workflow's executions (of a version or alias too)."""
    parts = _arn_parts(state_machine_arn)
    return ":".join([*parts[:5], "execution", parts[6], name])


def _raise_failure(exc: Exception, operation: str, arn: str) -> NoReturn:
    """Raise what a failed Step Functions call means for the record: transient, misconfigured or
    permanent; an error this module does not know is raised as it is (retried, logged with its traceback)."""
    code = error_code(exc)
    text = f"step functions {operation} of {arn}: {error_text(exc)}"
    if is_retryable(exc) or code in _TRANSIENT:
        raise TransientError(text) from exc
    if code is None:
        raise exc
    if code in _MISCONFIGURED or code.startswith("AccessDenied") or code.upper().startswith("KMS"):
        raise Misconfiguration(
            text,
            f"the function cannot use state machine {arn}: check that it exists in this account and region "
            "and that the consumer has IdempotentConsumer.grant_start_execution on it",
        ) from exc
    if code in _PERMANENT:
        raise PermanentError(text) from exc
    raise exc
