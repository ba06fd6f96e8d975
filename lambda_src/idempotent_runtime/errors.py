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


# Error codes caused by the message itself: retrying the same input gives the same answer.
PERMANENT_CODES = frozenset(
    {"ValidationException", "SerializationException", "ItemCollectionSizeLimitExceededException"}
)


def _error(exc: BaseException) -> dict:
    """``exc.response["Error"]`` of a botocore ``ClientError`` (duck-typed: botocore is not imported here);
    ``{}`` for any other exception, including user exceptions whose ``response`` has another shape."""
    try:
        response = getattr(exc, "response", None)
    except Exception:  # a property that raises
        return {}
    error = response.get("Error") if isinstance(response, dict) else None
    return error if isinstance(error, dict) else {}


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a botocore ``ClientError``, or None."""
    code = _error(exc).get("Code")
    return code if isinstance(code, str) else None


def error_message(exc: BaseException) -> str:
    """The AWS error message of a botocore ``ClientError``, or ``""``."""
    message = _error(exc).get("Message")
    return message if isinstance(message, str) else ""


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
            return f"dynamodb rejected the request ({code}): {error_message(exc)}"
        return None
    if type(exc).__name__ == "ParamValidationError":
        return f"invalid request parameters: {exc}"
    return None


def describe(exc: BaseException) -> str:
    code = error_code(exc)
    if code is not None:
        message = error_message(exc)
        return f"{code}: {message}" if message else code
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
