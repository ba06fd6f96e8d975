"""What the blocks know about the queues they create, kept in Python beside the queue object.

A consumer given ``messaging.queue`` reads the queue's type, visibility timeout, retention and redrive from
here instead of asking jsii (every read is a round trip), and knows which alarms a Messaging already made.
For any other queue the consumer reads what CDK knows about it (:func:`describe_queue`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs

from idempotent_pipeline._rules import TOKEN, is_token

# SQS's own visibility timeout and retention when a queue sets none.
SQS_DEFAULT_VISIBILITY_SECONDS = 30
SQS_DEFAULT_RETENTION_SECONDS = 4 * 24 * 3600
# AWS's advice for a queue Lambda reads: maxReceiveCount at least 5, so that receives the poller loses to
# throttling do not move a message to the dead-letter queue unprocessed
# (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
LAMBDA_MIN_MAX_RECEIVE_COUNT = 5


def expires_before_dead_letter(retention: int, max_receive_count: int, visibility: int) -> bool:
    """A message that keeps failing expires before its last receive: SQS deletes it at the end of the
    queue's retention and never moves an expired message to the dead-letter queue."""
    return retention < max_receive_count * visibility


def dead_letter_expires_early(fifo: bool, dead_letter_retention: int, retention: int) -> bool:
    """On a standard queue a dead letter keeps its enqueue time, so a dead-letter queue that keeps messages
    no longer than its source deletes them early, or at once: with equal retention periods a dead letter
    gets only what was left of its source's (AWS: the DLQ's retention longer than the source's). A FIFO
    dead-letter queue restarts the clock."""
    return not fifo and dead_letter_retention <= retention


@dataclass(frozen=True)
class QueueFacts:
    """A queue's settings as plain values; None where unknown, TOKEN where only known at deploy time."""

    fifo: bool | None
    visibility_seconds: Any = None
    retention_seconds: Any = None
    max_receive_count: Any = None
    dead_letter_queue: sqs.IQueue | None = None
    encryption_key: kms.IKey | None = None
    encryption_key_known: bool = False  # False: ask the queue (imported queues)
    alarmed: bool = False  # a Messaging alarms on its depth (DLQs) or age (source queue)
    removal_policy: RemovalPolicy | None = None  # None: unknown (not made by a block)


_FACTS: weakref.WeakKeyDictionary[Any, QueueFacts] = weakref.WeakKeyDictionary()


def remember(queue: sqs.IQueue, facts: QueueFacts) -> None:
    _FACTS[queue] = facts


def describe_queue(queue: sqs.IQueue) -> QueueFacts:
    """The facts a block remembered, or what CDK knows (a queue defined in the app, or imported)."""
    known = _FACTS.get(queue)
    if known is not None:
        return known
    fifo = bool(queue.fifo)
    if not isinstance(queue, sqs.Queue):
        # Imported: SQS's defaults are not this queue's settings, so they stay unknown.
        if not fifo and is_token(queue.queue_arn):
            fifo = None  # type: ignore[assignment]
        return QueueFacts(fifo=fifo)
    cfn = queue.node.default_child
    visibility = retention = None
    if isinstance(cfn, sqs.CfnQueue):
        visibility = _number(cfn.visibility_timeout, SQS_DEFAULT_VISIBILITY_SECONDS)
        retention = _number(cfn.message_retention_period, SQS_DEFAULT_RETENTION_SECONDS)
    redrive = queue.dead_letter_queue
    return QueueFacts(
        fifo=fifo,
        visibility_seconds=visibility,
        retention_seconds=retention,
        max_receive_count=_number(redrive.max_receive_count, None) if redrive is not None else None,
        dead_letter_queue=redrive.queue if redrive is not None else None,
    )


def _number(value: Any, default: int | None) -> Any:
    if value is None:
        return default
    return TOKEN if is_token(value) else int(value)
