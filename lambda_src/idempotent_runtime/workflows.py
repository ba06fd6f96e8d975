"""Start an execution exactly once per message key, from a guarded-mode processor: a Step Functions
execution (:func:`start_execution_once`) or a Lambda durable function's
(:func:`idempotent_runtime.durable.start_durable_execution_once`)::

    from idempotent_runtime.workflows import start_execution_once

    def start_order_workflow(message):
        return start_execution_once(message, os.environ["STATE_MACHINE_ARN"], message.json_object())

One mechanism, two services (:class:`ExecutionService`): the execution's name is the key's
(:func:`execution_name`), so the service itself refuses a second execution for a key while it keeps the
name - a re-run of the processor after its environment died between the start and the key's completion, or
a delivery after the key's record expired, finds the execution and returns its ARN; an execution of the name
with another input is a conflict. Step Functions keeps names 90 days and checks them for STANDARD workflows
only: an Express state machine is refused before anything starts. docs/runtime.md, "Start a workflow exactly
once" and "Start a durable function exactly once".

Not part of the function's code asset unless your code names it.
"""

from __future__ import annotations

import itertools
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar, NoReturn

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

__all__ = [
    "DurableFunctions",
    "ExecutionConflict",
    "ExecutionService",
    "StepFunctions",
    "execution_input",
    "execution_name",
    "start_execution_once",
]

# A key is written as its execution name when its parts hold only ASCII letters, digits and `-` (joined
# with `_`, within the service's length); otherwise the name is the SHA-256 (hex) of the key, as its
# idempotency key is when that does not fit (64 characters: within both services' limits).
NAME_SEPARATOR = "_"
# Step Functions' execution input: 256 KiB of UTF-8 (canonical JSON is ASCII: one byte a character).
MAX_INPUT_BYTES = 262_144
STANDARD = "STANDARD"
# What start_execution_once asks Step Functions, on the state machine and on its executions
# (IdempotentConsumer.grant_start_execution grants exactly these).
STATE_MACHINE_ACTIONS = ("states:StartExecution", "states:DescribeStateMachine")
EXECUTION_ACTIONS = ("states:DescribeExecution",)
# On a state machine's customer managed key, through Step Functions: a start encrypts the input, a describe
# decrypts it.
STATE_MACHINE_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
# What start_durable_execution_once asks Lambda (IdempotentConsumer.grant_start_durable_execution grants
# exactly these): on the function version or alias it invokes; on the function, its versions and their
# executions (arn:...:function:NAME:VERSION/durable-execution/..., matched by function:NAME:*), to find the
# execution that holds a name - Lambda lists one version's executions at a time - and read its input. On the
# customer managed key of its durable execution data (DurableConfig.KMSKeyArn), through Lambda: an Invoke
# encrypts its input (kms:GenerateDataKey), reading an execution decrypts it (kms:Decrypt).
DURABLE_FUNCTION_ACTIONS = ("lambda:InvokeFunction", "lambda:GetFunctionConfiguration")
DURABLE_LIST_ACTIONS = ("lambda:ListDurableExecutionsByFunction", "lambda:ListVersionsByFunction")
DURABLE_EXECUTION_ACTIONS = ("lambda:ListDurableExecutionsByFunction", "lambda:GetDurableExecution")
DURABLE_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")

_calls = Retrier()
# State machines seen to be STANDARD, durable functions seen to be durable, by this execution environment
# (a type cannot change; a function's durable configuration is set when it is created).
_standard: set[str] = set()
_durable: set[str] = set()


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


def execution_input(value: Any) -> str:
    """The text sent as the input: canonical JSON (keys sorted, compact, numbers by value, ASCII escapes),
    so the same value is always the same text, the text the service compares."""
    return canonical_json(value)


class ExecutionService(ABC):
    """A service that starts an execution under a name and refuses a second one with that name: its name
    rule, input limit and errors, and how to start, check and read back. :meth:`start_once` is the one
    mechanism both services run."""

    what: ClassVar[str]  # what the target is, in errors: "state machine"
    title: ClassVar[str]  # the service, in a failed call's text: "step functions"
    limit: ClassVar[tuple[str, str, int]]  # what the input is called, whose limit ("Lambda's"), its bytes
    max_name_length: ClassVar[int]
    grant: ClassVar[str]  # the IdempotentConsumer method that grants what the service is asked
    misconfigured: ClassVar[frozenset[str]]  # codes: the target or the function's permissions are wrong
    permanent: ClassVar[frozenset[str]]  # codes about the request's content: the same every time
    transient: ClassVar[frozenset[str]]  # codes worth a later delivery beyond throttling and 5xx
    client_service: ClassVar[str]  # the boto3 service name of its client

    def __init__(self) -> None:
        self.client = LazyClient(self.client_service)
        self.plain_name = re.compile(f"[0-9A-Za-z_-]{{1,{self.max_name_length}}}")

    @abstractmethod
    def prepare(self, client: Any, target: str) -> None:
        """Refuse (``Misconfiguration``) a target whose executions the service would not name."""

    @abstractmethod
    def start(self, client: Any, key: Key, target: str, name: str, text: str) -> str | None:
        """The ARN of the execution the service started, or holds, for ``name`` and ``text``; None when the
        name is taken by an execution it will not return (then :meth:`existing` decides)."""

    @abstractmethod
    def existing(self, client: Any, target: str, name: str) -> tuple[str, str]:
        """The ARN and input text of the execution that holds ``name``."""

    def name(self, key: Key) -> str:
        """The execution name of ``key``: ``partition_sort`` when both hold only ASCII letters, digits and
        ``-`` and it fits the service's length, else the SHA-256 (hex) of the key (that of
        ``key.idempotency_key``'s hashed form). The same for the same key, different for different keys,
        always valid."""
        return join_key((key.partition, key.sort), NAME_SEPARATOR, self.plain_name)

    def start_once(self, message: Message, target: str, value: Any, client: Any = None) -> str:
        """Start an execution of ``target`` with ``value`` under the key's name, once; its ARN."""
        key = message.key
        if key is None:
            raise ValueError("starting an execution once needs the message's key: call it from a processor")
        name, text = self.name(key), execution_input(value)
        called, whose, limit = self.limit
        if len(text) > limit:
            raise PermanentError(f"{called} of key {key} is {len(text)} bytes as JSON, over {whose} {limit}")
        client = client if client is not None else self.client()
        self.prepare(client, target)
        arn = self.start(client, key, target, name, text)
        if arn is not None:
            return arn
        arn, stored = self.existing(client, target, name)
        if stored != text and not _same_value(stored, text):
            raise ExecutionConflict(key, arn, sha256_hex(text.encode("ascii")), _fingerprint(stored))
        return arn

    def input_of(self, described: dict[str, Any], field: str, operation: str, arn: str) -> str:
        """The input text in ``field`` of what ``operation`` answered for the execution ``arn``."""
        stored = described.get(field)
        if not isinstance(stored, str):
            raise Misconfiguration(
                f"{operation} of {arn} returned no input",
                "the function cannot read the execution's input: with a customer managed key on the "
                f"{self.what} it needs kms:Decrypt on that key through {self.title}",
            )
        return stored

    def call(self, operation: Any, name: str, arn: str, **request: Any) -> Any:
        """``operation(**request)`` with the runtime's retries; a failure raised as :meth:`fail` says."""
        try:
            return _calls(operation, **request)
        except Exception as exc:
            self.fail(exc, name, arn)

    def fail(self, exc: Exception, operation: str, arn: str) -> NoReturn:
        """Raise what a failed call means for the record: transient, misconfigured or permanent; an error
        the service's lists do not name is raised as it is (retried, logged with its traceback)."""
        code = error_code(exc)
        text = f"{self.title} {operation} of {arn}: {error_text(exc)}"
        if is_retryable(exc) or code in self.transient:
            raise TransientError(text) from exc
        if code is None:
            raise exc
        if code in self.misconfigured or code.startswith("AccessDenied") or code.upper().startswith("KMS"):
            raise Misconfiguration(
                text,
                f"the function cannot use {self.what} {arn}: check that it exists in this account and region "
                f"and that the consumer has IdempotentConsumer.{self.grant} on it",
            ) from exc
        if code in self.permanent:
            raise PermanentError(text) from exc
        raise exc


def _same_value(stored: str, text: str) -> bool:
    """Whether an execution's input text is the same JSON value as ``text`` (another tool's spacing)."""
    try:
        return execution_input(parse_json(stored)) == text
    except (ValueError, RecursionError):
        return False


def _fingerprint(text: str) -> str:
    """The fingerprint of an execution's input: of its canonical JSON, or of its text when not JSON."""
    try:
        return sha256_hex(execution_input(parse_json(text)).encode("ascii"))
    except (ValueError, RecursionError):
        return raw_fingerprint(text)


# --- Step Functions ---------------------------------------------------------------------------------------


class StepFunctions(ExecutionService):
    """STANDARD state machines: names unique per state machine for 90 days; the name and input of a running
    execution return it, a closed one (any input) or another input fail ``ExecutionAlreadyExists``."""

    what = "state machine"
    title = "step functions"
    limit = ("workflow input", "Step Functions'", MAX_INPUT_BYTES)
    max_name_length = 80
    grant = "grant_start_execution"
    misconfigured = frozenset(
        {"StateMachineDoesNotExist", "StateMachineDeleting", "InvalidArn", "ResourceNotFound"}
    )
    permanent = frozenset({"InvalidExecutionInput", "InvalidName", "ValidationException"})
    transient = frozenset({"ExecutionLimitExceeded", "ExecutionDoesNotExist"})
    client_service = "stepfunctions"

    def prepare(self, sfn: Any, state_machine_arn: str) -> None:
        """Refuse an Express state machine: Step Functions neither checks its execution names nor describes
        its executions, so nothing would stop a second start. Asked once per state machine and
        environment."""
        unqualified = ":".join(_state_machine_arn_parts(state_machine_arn)[:7])  # without version or alias
        if unqualified in _standard:
            return
        described = self.call(
            sfn.describe_state_machine,
            "DescribeStateMachine",
            unqualified,
            stateMachineArn=unqualified,
            includedData="METADATA_ONLY",
        )
        kind = described.get("type", STANDARD)
        if kind != STANDARD:
            raise Misconfiguration(
                f"state machine {unqualified} is {kind}: start_execution_once starts STANDARD workflows only",
                f"state machine {unqualified} is an {kind} workflow, whose execution names Step Functions "
                "does not check: use a STANDARD state machine",
            )
        _standard.add(unqualified)

    def start(self, sfn: Any, key: Key, state_machine_arn: str, name: str, text: str) -> str | None:
        try:
            started = _calls(sfn.start_execution, stateMachineArn=state_machine_arn, name=name, input=text)
        except Exception as exc:
            if error_code(exc) == "ExecutionAlreadyExists":
                return None  # closed (any input), or running with another input: its input decides
            self.fail(exc, "StartExecution", state_machine_arn)
        return str(started["executionArn"])

    def existing(self, sfn: Any, state_machine_arn: str, name: str) -> tuple[str, str]:
        """``arn:PARTITION:states:REGION:ACCOUNT:execution:STATE_MACHINE:NAME``, as Step Functions names a
        STANDARD workflow's executions (of a version or alias too), described."""
        parts = _state_machine_arn_parts(state_machine_arn)
        arn = ":".join([*parts[:5], "execution", parts[6], name])
        described = self.call(sfn.describe_execution, "DescribeExecution", arn, executionArn=arn)
        return str(described["executionArn"]), self.input_of(described, "input", "DescribeExecution", arn)


def _state_machine_arn_parts(state_machine_arn: str) -> list[str]:
    parts = state_machine_arn.split(":") if isinstance(state_machine_arn, str) else []
    if len(parts) < 7 or parts[2] != "states" or parts[5] != "stateMachine":
        raise Misconfiguration(
            f"{state_machine_arn!r} is not a state machine ARN",
            "start_execution_once takes a state machine's ARN: "
            "arn:aws:states:REGION:ACCOUNT:stateMachine:NAME",
        )
    return parts


# --- Lambda durable functions -----------------------------------------------------------------------------

# Lambda's asynchronous invocation payload: 1 MB (canonical JSON is ASCII: one byte a character).
MAX_DURABLE_PAYLOAD_BYTES = 1_048_576
# The first botocore that knows Invoke's DurableExecutionName (and boto3 of the same version).
DURABLE_SDK = "1.42.1"


class DurableFunctions(ExecutionService):
    """Lambda durable functions, invoked asynchronously by a version, an alias or ``$LATEST``: the name and
    payload of an execution, running or closed (within the function's retention, 1-90 days), return it;
    another payload fails ``DurableExecutionAlreadyStartedException``."""

    what = "durable function"
    title = "lambda"
    limit = (
        "durable execution payload",
        "Lambda's asynchronous invocation limit,",
        MAX_DURABLE_PAYLOAD_BYTES,
    )
    max_name_length = 64
    grant = "grant_start_durable_execution"
    misconfigured = frozenset(
        {
            "ResourceNotFoundException",
            "InvalidParameterValueException",
            "InvalidRuntimeException",
            "InvalidZipFileException",
        }
    )
    permanent = frozenset(
        {"RequestTooLargeException", "InvalidRequestContentException", "UnsupportedMediaTypeException"}
    )
    transient = frozenset({"ResourceNotReadyException", "ResourceConflictException"})
    client_service = "lambda"

    def prepare(self, lam: Any, function: str) -> None:
        """Refuse an SDK that cannot name executions, an unqualified function (Lambda invokes durable
        functions only by version, alias or $LATEST) and a function that is not durable (its invocations
        are not named: every delivery would run it again). Asked once per function and environment."""
        gap = sdk_gap(lam.meta.service_model)
        if gap is not None:
            raise Misconfiguration(*gap)
        function_name(function)
        if function in _durable:
            return
        described = self.call(
            lam.get_function_configuration, "GetFunctionConfiguration", function, FunctionName=function
        )
        if not described.get("DurableConfig"):
            raise Misconfiguration(
                f"function {function} is not durable: start_durable_execution_once starts durable functions "
                "only",
                f"function {function} has no DurableConfig, so Lambda does not name its invocations and "
                "would run it again for every delivery: give it durable_config (a durable function)",
            )
        _durable.add(function)

    def start(self, lam: Any, key: Key, function: str, name: str, text: str) -> str | None:
        try:
            invoked = _calls(
                lam.invoke,
                FunctionName=function,
                InvocationType="Event",
                DurableExecutionName=name,
                Payload=text.encode("ascii"),
            )
        except Exception as exc:
            if error_code(exc) == "DurableExecutionAlreadyStartedException":
                return None  # another payload: the execution's decides
            self.fail(exc, "Invoke", function)
        arn = invoked.get("DurableExecutionArn")
        if not isinstance(arn, str):  # a retry names the same execution: nothing can start twice
            raise TransientError(f"lambda Invoke of {function} returned no DurableExecutionArn")
        owner = arn.split("/", 1)[0].split(":")[6:7]
        if owner != [function_name(function)[0]]:
            raise PermanentError(
                f"execution name {name} of key {key} is held by {arn}, an execution of another function "
                "(Lambda's durable execution names are unique per account and region): nothing started"
            )
        return arn

    def existing(self, lam: Any, function: str, name: str) -> tuple[str, str]:
        """The execution of the function that holds ``name``, read with its input."""
        unqualified = function.rsplit(":", 1)[0]
        arn = self._holder(lam, function, unqualified, name)
        if arn is None:  # listed once visible; or held by another function's execution
            raise TransientError(
                f"lambda refused execution name {name} for {function} (another payload) but lists no "
                f"execution of that name in any version of {unqualified}: not visible yet, or held by "
                "another function's execution"
            )
        described = self.call(
            lam.get_durable_execution,
            "GetDurableExecution",
            arn,
            DurableExecutionArn=arn,
            IncludeExecutionData=True,
        )
        return arn, self.input_of(described, "InputPayload", "GetDurableExecution", arn)

    def _holder(self, lam: Any, function: str, unqualified: str, name: str) -> str | None:
        """The ARN of the function's execution named ``name``. Lambda lists a function's executions one
        version at a time (``$LATEST``'s without a qualifier): the version ``function`` resolves to first,
        then, for an execution started before a deploy, the function's other versions, newest first."""
        qualifier = function_name(function)[1]
        tried: set[str] = set()
        for version in itertools.chain([qualifier], self._versions(lam, unqualified)):
            if version in tried:
                continue
            tried.add(version)
            for execution in self._pages(
                lam.list_durable_executions_by_function,
                "ListDurableExecutionsByFunction",
                "DurableExecutions",
                FunctionName=unqualified,
                Qualifier=version,
                DurableExecutionName=name,  # the names that contain it: "o-1" lists "o-10" too
                MaxItems=1000,
            ):
                if execution.get("DurableExecutionName") == name:
                    return str(execution["DurableExecutionArn"])
        return None

    def _versions(self, lam: Any, unqualified: str) -> Iterator[str]:
        """The function's versions, newest first (``$LATEST`` first), asked only when needed."""
        versions = [
            str(v["Version"])
            for v in self._pages(
                lam.list_versions_by_function,
                "ListVersionsByFunction",
                "Versions",
                FunctionName=unqualified,
                MaxItems=10_000,
            )
        ]
        yield from sorted(versions, key=lambda v: (v != "$LATEST", -int(v) if v.isdigit() else 0))

    def _pages(self, operation: Any, name: str, field: str, **request: Any) -> Iterator[dict[str, Any]]:
        """The items of every page a Lambda list operation answers (``Marker`` / ``NextMarker``)."""
        while True:
            page = self.call(operation, name, str(request["FunctionName"]), **request)
            yield from page.get(field, [])
            if not page.get("NextMarker"):
                return
            request["Marker"] = page["NextMarker"]


def function_name(function: str) -> tuple[str, str]:
    """``(name, qualifier)`` of a qualified function - an ARN, ``ACCOUNT:function:NAME:QUALIFIER`` or
    ``NAME:QUALIFIER``; an unqualified one is a misconfiguration."""
    parts = function.split(":") if isinstance(function, str) else []
    if parts[:1] == ["arn"]:
        parts = parts[6:] if len(parts) >= 7 and parts[2] == "lambda" and parts[5] == "function" else []
    elif len(parts) >= 3 and parts[1] == "function":
        parts = parts[2:]
    if len(parts) != 2 or not all(parts):
        raise Misconfiguration(
            f"{function!r} is not a qualified function: Lambda invokes durable functions by version, alias "
            "or $LATEST only",
            "start_durable_execution_once takes a function version's or alias's ARN "
            "(arn:aws:lambda:REGION:ACCOUNT:function:NAME:QUALIFIER; Version.function_arn, "
            "Alias.function_arn in the app), or NAME:QUALIFIER",
        )
    return parts[0], parts[1]


def sdk_gap(service_model: Any) -> tuple[str, str] | None:
    """Why a Lambda client of this service model cannot name a durable execution (reason, hint), or None."""
    members = service_model.operation_model("Invoke").input_shape.members
    if "DurableExecutionName" in members:
        return None
    import botocore

    return (
        f"this runtime's botocore {botocore.__version__} does not know Lambda Invoke's DurableExecutionName: "
        "no durable execution can be started by name",
        f"bundle boto3>={DURABLE_SDK} with the function (a requirements.txt line in its code directory): the "
        "SDK in Lambda's runtime is older",
    )


STEP_FUNCTIONS = StepFunctions()
DURABLE_FUNCTIONS = DurableFunctions()


def execution_name(key: Key) -> str:
    """The Step Functions execution name of ``key`` (:meth:`ExecutionService.name`; ≤ 80 characters)."""
    return STEP_FUNCTIONS.name(key)


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
    return STEP_FUNCTIONS.start_once(message, state_machine_arn, input, client)
