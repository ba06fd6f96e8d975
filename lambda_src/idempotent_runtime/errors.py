"""The families of failure and how exceptions (AWS errors included) map onto them: permanent (the DLQ with a
reason), transient (SQS delivers it again) and misconfigured (the deployment is wrong: retried, never
quarantined)."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from idempotent_runtime.contract import ConfigurationError, DeadLetterKind

__all__ = [
    "ConfigurationError",
    "Conflict",
    "Failure",
    "FailureFamily",
    "InvalidMessage",
    "LeaseLost",
    "Misconfiguration",
    "PermanentError",
    "Resource",
    "TransientError",
    "classify",
]


class PermanentError(Exception):
    """This message can never succeed: do not retry it, send it to the dead-letter queue with ``reason``.

    Raise it from a processing function for input your code rejects (an unknown account, a negative amount).
    The runtime raises its subclass :class:`InvalidMessage` for input it cannot key or store.
    """

    kind = DeadLetterKind.REJECTED

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidMessage(PermanentError):
    """The runtime itself rejected the message: bad JSON, a missing or invalid key, a number DynamoDB cannot
    hold, nesting over 32 levels, an item over 400 KB, a reserved name."""

    kind = DeadLetterKind.INVALID


class Conflict(PermanentError):
    """The key is already done with a different payload fingerprint - or, ``claimed``, held by a guarded
    claim of another payload whose lease expired (its effect may have run, so only it may take over)."""

    kind = DeadLetterKind.CONFLICT

    def __init__(
        self,
        key: object,
        fingerprint: str,
        stored_fingerprint: str,
        *,
        claimed: bool = False,
        version: str | None = None,
    ) -> None:
        if claimed:
            state = "is claimed by another payload whose effect may have run"
        elif version is not None:  # versioned mode: the same version, another state
            state = f"holds version {version} with another payload"
        else:
            state = "is already done with another payload"
        super().__init__(
            f"conflict: key {key} {state} (fingerprint {stored_fingerprint}), "
            f"this message's fingerprint is {fingerprint}"
        )
        self.key = key
        self.fingerprint = fingerprint
        self.stored_fingerprint = stored_fingerprint


class TransientError(Exception):
    """Retry later: the record is reported as a batch item failure and SQS delivers it again."""


class LeaseLost(TransientError):
    """guarded mode: this invocation's claim on the key expired and another invocation took it over.

    Raised by ``message.lease.extend()`` and when a completion is refused. Stop the effect if you can: the
    new owner runs it (with the same ``message.key.idempotency_key``).
    """


class Misconfiguration(Exception):
    """The runtime found, while handling a record, that the deployment does not match its configuration
    (no AWS error says so): the record is retried, never quarantined, and ``hint`` names the likely
    misconfiguration in the batch's ERROR line (keep it the same for every record it applies to)."""

    def __init__(self, reason: str, hint: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.hint = hint


# --- classification -------------------------------------------------------------------------------------


class FailureFamily(StrEnum):
    """How a failed record is treated."""

    PERMANENT = "permanent"  # to the DLQ with the reason, never retried
    TRANSIENT = "transient"  # reported as a batch item failure: SQS delivers it again
    MISCONFIGURED = "misconfigured"  # the deployment is wrong: retried, never quarantined, named once a batch


class Resource(StrEnum):
    """The resource a failed AWS call used: a hint names the variable to check."""

    TABLE = "table"  # TABLE_NAME
    DLQ = "dlq"  # DLQ_URL
    TARGET = "target"  # EMIT_TARGET_ARN (the relay)


class Failure(NamedTuple):
    """How to treat an exception: its ``family``; ``hint`` (when misconfigured) names the likely
    misconfiguration, for the batch's ERROR line."""

    family: FailureFamily
    reason: str
    kind: DeadLetterKind = DeadLetterKind.INVALID
    hint: str | None = None

    @property
    def permanent(self) -> bool:
        return self.family is FailureFamily.PERMANENT

    @property
    def misconfigured(self) -> bool:
        return self.family is FailureFamily.MISCONFIGURED


# AWS error codes caused by the request content: retrying the same input gives the same answer.
PERMANENT_CODES = frozenset(
    {"ValidationException", "SerializationException", "ItemCollectionSizeLimitExceededException"}
)
# ValidationException messages that say the table is not the one the configuration describes (DynamoDB and
# moto word them so): the message is fine, the deployment is not.
_SCHEMA_MESSAGES = (
    "missing the key",
    "type mismatch for key",
    "provided key element does not match the schema",
    "key element does not match",
    "number of conditions on the keys is invalid",
)
# Codes that mean the resource does not exist, or this function may not use it.
_MISSING_CODES = frozenset(
    {
        "ResourceNotFoundException",
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "NonExistentQueue",
        "InvalidAddress",
    }
)
_CREDENTIAL_CODES = frozenset(
    {"UnrecognizedClientException", "InvalidClientTokenId", "MissingAuthenticationToken", "InvalidSecurity"}
)
# Throttling by KMS is transient like any throttling; every other KMS error is the key's configuration.
_KMS_TRANSIENT = frozenset({"KMSThrottlingException", "KmsThrottled", "KMS.ThrottlingException"})


def _response(exc: BaseException, part: str) -> dict:
    """``exc.response[part]`` of a botocore ``ClientError`` (duck-typed: botocore is not imported here);
    ``{}`` for any other exception, including user exceptions whose ``response`` has another shape."""
    try:
        response = getattr(exc, "response", None)
    except Exception:  # a property that raises
        return {}
    found = response.get(part) if isinstance(response, dict) else None
    return found if isinstance(found, dict) else {}


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a botocore ``ClientError``, or None."""
    code = _response(exc, "Error").get("Code")
    return code if isinstance(code, str) else None


def error_message(exc: BaseException) -> str:
    """The AWS error message of a botocore ``ClientError``, or ``""``."""
    message = _response(exc, "Error").get("Message")
    return message if isinstance(message, str) else ""


def http_status(exc: BaseException) -> int | None:
    status = _response(exc, "ResponseMetadata").get("HTTPStatusCode")
    return status if isinstance(status, int) else None


def is_conditional_check_failed(exc: BaseException) -> bool:
    return error_code(exc) == "ConditionalCheckFailedException"


def old_item(exc: BaseException) -> dict:
    """The item a failed condition returned (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), or ``{}``."""
    return _response(exc, "Item")


def too_large(exc: BaseException) -> bool:
    """SQS refused a message for its size (body and attributes over the queue's maximum)."""
    text = f"{error_code(exc)} {error_message(exc)}".lower()
    return "shorter than" in text or "toolong" in text


_RESOURCE_NAMES = {
    Resource.TABLE: "the DynamoDB table (TABLE_NAME)",
    Resource.DLQ: "the dead-letter queue (DLQ_URL)",
    Resource.TARGET: "the emit target (EMIT_TARGET_ARN)",
}


def misconfiguration(exc: BaseException, where: Resource) -> str | None:
    """The likely misconfiguration ``exc`` points at, or None. ``where`` is the resource the call used."""
    code = error_code(exc)
    if code is None:
        return None
    message = error_message(exc)
    resource = _RESOURCE_NAMES[where]
    if code == "ValidationException" and where is Resource.TABLE:
        lowered = message.lower()
        if any(text in lowered for text in _SCHEMA_MESSAGES):
            return (
                "the table's key schema differs from PARTITION_KEY/SORT_KEY (the table's string partition "
                f"and sort key), or a processor's entry uses other key attributes: {message}"
            )
        return None
    if where is Resource.DLQ and too_large(exc):
        return (
            "the dead-letter queue (DLQ_URL) refuses even the smallest copy of a message its source queue "
            f"took: give it the source queue's maximum message size: {code}: {message}"
        )
    if code in _MISSING_CODES:
        return f"{resource} does not exist in this account and region: {code}: {message}".rstrip(": ")
    if code.startswith("AccessDenied") or code.endswith(".AccessDenied") or code == "AuthorizationError":
        return f"the function's role may not use {resource}: {code}: {message}".rstrip(": ")
    if code in _CREDENTIAL_CODES:
        return f"the function's credentials are not accepted: {code}: {message}".rstrip(": ")
    if code.upper().startswith("KMS") and code not in _KMS_TRANSIENT:
        return f"the KMS key of {resource} is not usable by the function: {code}: {message}".rstrip(": ")
    return None


def classify(exc: BaseException, where: Resource = Resource.TABLE) -> Failure:
    """Permanent, transient or misconfigured, with the reason to log or send to the DLQ. Permanent:
    :class:`PermanentError`, ``RecursionError``, AWS errors caused by the request content and client-side
    parameter validation. Misconfigured: :class:`Misconfiguration` and :func:`misconfiguration`. Everything
    else (throttling, 5xx, timeouts, unknown exceptions) is transient: nothing is lost.
    """
    if isinstance(exc, PermanentError):
        return Failure(FailureFamily.PERMANENT, exc.reason, exc.kind)
    if isinstance(exc, TransientError):
        return Failure(FailureFamily.TRANSIENT, error_text(exc))
    if isinstance(exc, Misconfiguration):
        return Failure(FailureFamily.MISCONFIGURED, exc.reason, hint=exc.hint)
    if isinstance(exc, RecursionError):
        return Failure(
            FailureFamily.PERMANENT,
            f"input nested too deeply for the runtime or the processor ({error_text(exc)})",
        )
    hint = misconfiguration(exc, where)
    if hint is not None:
        return Failure(FailureFamily.MISCONFIGURED, error_text(exc), hint=hint)
    code = error_code(exc)
    if code is not None:
        if code in PERMANENT_CODES:
            service = "dynamodb" if where is Resource.TABLE else "sqs"
            return Failure(
                FailureFamily.PERMANENT, f"{service} rejected the request ({code}): {error_message(exc)}"
            )
        return Failure(FailureFamily.TRANSIENT, error_text(exc))
    if type(exc).__name__ == "ParamValidationError":
        return Failure(FailureFamily.PERMANENT, f"invalid request parameters: {exc}")
    return Failure(FailureFamily.TRANSIENT, error_text(exc))


# Codes worth another attempt inside the same invocation (the runtime's own retries, see retries.py).
RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TransactionInProgressException",
        "InternalServerError",
        "InternalFailure",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "KmsThrottled",
        "KMSThrottlingException",
        "ReplicatedWriteConflictException",
    }
)
# botocore's network errors (by class name: botocore is not imported at cold start).
_NETWORK_ERRORS = frozenset(
    {
        "EndpointConnectionError",
        "ConnectionClosedError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionError",
        "HTTPClientError",
        "ProxyConnectionError",
        "ResponseStreamingError",
        "IncompleteReadError",
    }
)


def is_retryable(exc: BaseException) -> bool:
    """Throttling, 5xx, connection errors and timeouts: worth another attempt now."""
    code = error_code(exc)
    if code is not None:
        status = http_status(exc)
        return code in RETRYABLE_CODES or (status is not None and status >= 500)
    return any(cls.__name__ in _NETWORK_ERRORS for cls in type(exc).__mro__)


def error_text(exc: BaseException) -> str:
    """``Code: message`` of an AWS error, else ``Type: text`` (raises when the exception's own text does)."""
    code = error_code(exc)
    if code is not None:
        message = error_message(exc)
        return f"{code}: {message}" if message else code
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def safe_error_text(exc: BaseException) -> str:
    """:func:`error_text`, or the type's name when the exception cannot even be written: for a last resort."""
    try:
        return error_text(exc)
    except Exception:
        return type(exc).__name__
