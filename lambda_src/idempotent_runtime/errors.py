"""The two families of failure that matter (retry later / never retry) and how AWS errors map onto them."""

from __future__ import annotations


class ConfigurationError(ValueError):
    """An environment variable is missing or invalid: raised at cold start, never half-way through a batch."""


class PermanentError(Exception):
    """This message can never succeed: do not retry it, send it to the dead-letter queue with ``reason``.

    Raise it from a processing function for input your code rejects (an unknown account, a negative amount).
    The runtime raises its subclass :class:`InvalidMessage` for input it cannot key or store.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidMessage(PermanentError):
    """The runtime itself rejected the message: bad JSON, a missing or invalid key, an item over 400 KB."""


class TransientError(Exception):
    """Retry later: the record is reported as a batch item failure and SQS delivers it again."""


# Error codes that say "try again": throttling, capacity, conflicts, server-side trouble.
TRANSIENT_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "LimitExceededException",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "TransactionConflictException",
        "TransactionInProgressException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
# Error codes caused by the message itself: retrying the same input gives the same answer.
PERMANENT_CODES = frozenset(
    {"ValidationException", "SerializationException", "ItemCollectionSizeLimitExceededException"}
)


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a botocore ``ClientError`` (duck-typed: botocore is not imported here)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return code if isinstance(code, str) else None
    return None


def is_conditional_check_failed(exc: BaseException) -> bool:
    return error_code(exc) == "ConditionalCheckFailedException"


def permanent_reason(exc: BaseException) -> str | None:
    """The reason to quarantine for ``exc``, or None when ``exc`` is worth retrying.

    Permanent: :class:`PermanentError`, AWS errors caused by the request content (``ValidationException``),
    and botocore's client-side parameter validation. Everything else - throttling, 5xx, timeouts, connection
    errors, unknown exceptions from user code - is retried: SQS redrive bounds the retries, nothing is lost.
    """
    if isinstance(exc, PermanentError):
        return exc.reason
    if isinstance(exc, TransientError):
        return None
    code = error_code(exc)
    if code is not None:
        if code in PERMANENT_CODES:
            message = exc.response.get("Error", {}).get("Message", "")  # type: ignore[attr-defined]
            return f"dynamodb rejected the request ({code}): {message}"
        return None
    if type(exc).__name__ == "ParamValidationError":
        return f"invalid request parameters: {exc}"
    return None


def describe(exc: BaseException) -> str:
    code = error_code(exc)
    if code is not None:
        message = exc.response.get("Error", {}).get("Message", "")  # type: ignore[attr-defined]
        return f"{code}: {message}" if message else code
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
