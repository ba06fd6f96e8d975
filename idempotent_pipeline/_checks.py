"""Shared synth-time checks and helpers of the constructs (not a construct, not public API)."""

from __future__ import annotations

from aws_cdk import Duration, Names, Token
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

# SQS queue names: at most 80 characters, ".fifo" included for FIFO queues.
_MAX_QUEUE_NAME = 80
_FIFO_SUFFIX = ".fifo"


class ConfigurationError(ValueError):
    """A construct was given a configuration that cannot work; raised at synth time."""


# How CDK encodes a token in a string (Token.is_unresolved looks for the same marker).
_STRING_TOKEN_MARKER = "${Token["


def unresolved(value: object) -> bool:
    """True for a CDK token (a value only known at deploy time): such values are not checked.

    Plain Python strings, integers and booleans are decided here: asking jsii costs a round trip each.
    """
    if value is None or isinstance(value, (bool, int)):
        return False
    if isinstance(value, str):
        return _STRING_TOKEN_MARKER in value
    return bool(Token.is_unresolved(value))


def generated_fifo_queue_name(queue: IConstruct) -> str:
    """A unique physical name ending in .fifo, derived from the construct path as CDK does for FIFO topics.

    CloudFormation would generate a FIFO queue's name itself, but emulators and some tools need it explicit.
    """
    prefix = Names.unique_resource_name(queue, max_length=_MAX_QUEUE_NAME - len(_FIFO_SUFFIX), separator="-")
    return prefix + _FIFO_SUFFIX


def seconds(prop: str, value: Duration) -> int | None:
    """Whole seconds of a Duration, or None for an unresolved token."""
    if value.is_unresolved():
        return None
    millis = value.to_milliseconds()
    if millis % 1000:
        raise ConfigurationError(f"{prop} must be a whole number of seconds; got {value.to_human_string()}")
    return int(millis // 1000)


def require_fifo_queue(prop: str, queue: sqs.IQueue) -> None:
    """A FIFO pipeline only works with FIFO queues; a standard DLQ on a FIFO queue fails at deploy."""
    if (isinstance(queue, sqs.Queue) or not unresolved(queue.queue_arn)) and not queue.fifo:
        raise ConfigurationError(
            f"{prop} must be a FIFO queue (name ending in .fifo); got a standard queue: "
            f"{_describe(queue.queue_name, queue)}"
        )


def require_fifo_topic(prop: str, topic: sns.ITopic) -> None:
    if (isinstance(topic, sns.Topic) or not unresolved(topic.topic_arn)) and not topic.fifo:
        raise ConfigurationError(
            f"{prop} must be a FIFO topic (name ending in .fifo); got a standard topic: "
            f"{_describe(topic.topic_arn, topic)}"
        )


def require_int_range(prop: str, value: int | None, low: int, high: int | None = None) -> None:
    if value is None or unresolved(value):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{prop} must be an integer; got {value!r}")
    if value < low or (high is not None and value > high):
        wanted = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ConfigurationError(f"{prop} must be {wanted}; got {value}")


def require_name(prop: str, value: str) -> None:
    if unresolved(value):
        return
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{prop} must be a non-empty attribute name; got {value!r}")


def _describe(name: str, construct: IConstruct) -> str:
    return construct.node.path if unresolved(name) else name
