"""SQS message move tasks (dead-letter queue redrive) for the emulator: moto 5.2.5 answers HTTP 500.

As in SQS: a task moves the messages of a dead-letter queue (the source: a queue that is the redrive target
of another queue) to ``DestinationArn``, or, without one, each message back to the queue the redrive policy
moved it from; at most ``MaxNumberOfMessagesPerSecond`` a second when given; one running task per source.
A moved message is a new message, as SQS documents for redrive: a new message id and enqueue time (and
retention period), the same body, attributes and message group, its receive count started over; a FIFO
destination does not deduplicate it. A message the dead-letter queue did not receive through a
redrive policy (a function sent it there) has no queue to go back to: without ``DestinationArn`` the task
fails on it, as it names. Messages in flight when the task reaches them stay in the dead-letter queue.

The request handlers are installed on moto's ``SQSResponse`` by the ``message-move-tasks`` patch
(:mod:`idempotent_local.patches`).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from moto.core.responses import ActionResult
from moto.sqs.exceptions import SQSException
from moto.sqs.models import sqs_backends

from idempotent_local import queue_index

MAX_RATE = 500  # messages a second, SQS's limit for MaxNumberOfMessagesPerSecond


# SQS's errors (SQSException(code, message)), as SQS answers each request.
NOT_FOUND, UNSUPPORTED, INVALID = (
    "ResourceNotFoundException",
    "AWS.SimpleQueueService.UnsupportedOperation",
    "InvalidParameterValue",
)


@dataclass
class MoveTask:
    handle: str
    source_arn: str
    destination_arn: str | None
    rate: int | None
    to_move: int
    started_ms: int
    moved: int = 0
    status: str = "RUNNING"
    failure_reason: str | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def as_result(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "Status": self.status,
            "SourceArn": self.source_arn,
            "ApproximateNumberOfMessagesMoved": self.moved,
            "ApproximateNumberOfMessagesToMove": self.to_move,
            "StartedTimestamp": self.started_ms,
        }
        if self.status == "RUNNING":
            result["TaskHandle"] = self.handle
        if self.destination_arn:
            result["DestinationArn"] = self.destination_arn
        if self.rate is not None:
            result["MaxNumberOfMessagesPerSecond"] = self.rate
        if self.failure_reason:
            result["FailureReason"] = self.failure_reason
        return result


_TASKS: dict[str, list[MoveTask]] = {}  # source ARN -> its tasks, oldest first
_LOCK = threading.Lock()


def append(queue: Any, message: Any) -> None:
    """Put ``message`` at the end of ``queue`` without deduplication (a move, not a send)."""
    with queue._messages_lock:
        queue._messages.append(message)
        queue._messages_lock.notify_all()


def _queue(arn: str, parameter: str) -> Any:
    parts = arn.split(":") if isinstance(arn, str) else []
    if len(parts) != 6 or parts[2] != "sqs":
        raise SQSException(
            INVALID, f"Value {arn} for parameter {parameter} is invalid: not an SQS queue ARN."
        )
    queue = sqs_backends[parts[4]][parts[3]].queues.get(parts[5])
    if queue is None:
        raise SQSException(
            NOT_FOUND, f"The resource that you specified for the {parameter} parameter doesn't exist."
        )
    return queue


def start(source_arn: str, destination_arn: str | None = None, rate: int | None = None) -> MoveTask:
    source = _queue(source_arn, "SourceArn")
    backend = sqs_backends[source.account_id][source.region]
    if not backend.list_dead_letter_source_queues(source.name):
        raise SQSException(UNSUPPORTED, "Source queue must be configured as a Dead Letter Queue.")
    destination = _queue(destination_arn, "DestinationArn") if destination_arn else None
    if rate is not None and not 1 <= int(rate) <= MAX_RATE:
        raise SQSException(
            INVALID,
            f"Value {rate} for parameter MaxNumberOfMessagesPerSecond is invalid: must be 1 to {MAX_RATE}.",
        )
    with _LOCK:
        tasks = _TASKS.setdefault(source_arn, [])
        if any(task.status == "RUNNING" for task in tasks):
            raise SQSException(
                UNSUPPORTED,
                "There is already a task running. Only one active task is allowed for a source queue arn "
                "at a given time.",
            )
        candidates = list(source._messages)
        handle = base64.b64encode(
            json.dumps({"taskId": str(uuid.uuid4()), "sourceArn": source_arn}).encode()
        ).decode()
        task = MoveTask(
            handle=handle,
            source_arn=source_arn,
            destination_arn=destination_arn,
            rate=int(rate) if rate is not None else None,
            to_move=len(candidates),
            started_ms=int(time.time() * 1000),
        )
        tasks.append(task)
    task.thread = threading.Thread(
        target=_run, args=(task, source, destination, candidates), name=f"move-{source.name}", daemon=True
    )
    task.thread.start()
    return task


def _run(task: MoveTask, source: Any, destination: Any, candidates: list[Any]) -> None:
    for message in candidates:
        if task.cancelled.is_set():
            break
        with source._messages_lock:
            if not message.visible or message.delayed:
                continue  # in flight: left where it is
            target = destination
            if target is None:
                origin = getattr(message, "dead_letter_queue_source_arn", None)
                queues = sqs_backends[source.account_id][source.region].queues
                target = queues.get(origin.rsplit(":", 1)[-1]) if origin else None
                if target is None and message in source._messages:
                    task.status = "FAILED"
                    task.failure_reason = (
                        f"message {message.id} has no source queue to return to "
                        + (
                            "(it was sent to the dead-letter queue, not moved there by a redrive policy)"
                            if origin is None
                            else f"({origin} does not exist)"
                        )
                        + ": start the task with DestinationArn"
                    )
                    return
            try:
                queue_index.remove(source, message)
            except ValueError:
                continue  # deleted meanwhile
        message.id = str(uuid.uuid4())  # SQS: "assigned a new messageID and enqueueTime"
        message.approximate_receive_count = 0
        message.approximate_first_receive_timestamp = None
        message.visible_at = 0.0
        message.mark_sent()
        append(target, message)
        task.moved += 1
        if task.rate:
            task.cancelled.wait(1 / task.rate)
    if task.status == "RUNNING":
        task.status = "CANCELLED" if task.cancelled.is_set() else "COMPLETED"


def tasks_of(source_arn: str, max_results: int = 1) -> list[MoveTask]:
    _queue(source_arn, "SourceArn")
    with _LOCK:
        return list(reversed(_TASKS.get(source_arn, [])))[:max_results]


def cancel(handle: str) -> MoveTask:
    with _LOCK:
        task = next((t for ts in _TASKS.values() for t in ts if t.handle == handle), None)
    if task is None or task.status != "RUNNING":
        raise SQSException(NOT_FOUND, "Task does not exist, or it is not running.")
    task.status = "CANCELLING"
    task.cancelled.set()
    if task.thread is not None:
        task.thread.join(10)
    task.status = "CANCELLED"
    return task


# --- request handlers (methods of moto's SQSResponse once patched) ----------------------------------------


def start_message_move_task(self: Any) -> ActionResult:
    task = start(
        self._get_param("SourceArn"),
        self._get_param("DestinationArn"),
        self._get_param("MaxNumberOfMessagesPerSecond"),
    )
    return ActionResult({"TaskHandle": task.handle})


def list_message_move_tasks(self: Any) -> ActionResult:
    max_results = int(self._get_param("MaxResults") or 1)
    if not 1 <= max_results <= 10:
        raise SQSException(
            INVALID, f"Value {max_results} for parameter MaxResults is invalid: must be 1 to 10."
        )
    return ActionResult(
        {"Results": [t.as_result() for t in tasks_of(self._get_param("SourceArn"), max_results)]}
    )


def cancel_message_move_task(self: Any) -> ActionResult:
    task = cancel(self._get_param("TaskHandle"))
    return ActionResult({"ApproximateNumberOfMessagesMoved": task.moved})
