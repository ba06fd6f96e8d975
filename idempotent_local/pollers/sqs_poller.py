"""The poller of an SQS event source mapping: long-polls the queue for up to ``BatchSize`` messages with
all their attributes, invokes the function with Lambda's SQS event
(:func:`idempotent_local.events.lambda_sqs_event`), deletes the records that succeeded and leaves the rest
on the queue. A failed record comes back after the queue's visibility timeout (``retry_delay``: after that
many seconds, ``ChangeMessageVisibility``), and the queue's redrive policy moves it to the dead-letter queue
after ``maxReceiveCount`` receives, as in AWS."""

from __future__ import annotations

import threading
from typing import Any

from idempotent_local.accounting import Batch, batch_error, record_outcomes
from idempotent_local.events import lambda_sqs_event
from idempotent_local.functions import Worker
from idempotent_local.mappings import Mapping
from idempotent_local.pollers.poller import Poller

# What a receive asks for, so that each record of Lambda's event carries every attribute.
RECEIVE_ALL = {
    name: ["All"] for name in ("AttributeNames", "MessageSystemAttributeNames", "MessageAttributeNames")
}
DEPTH = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


def queue_depth(sqs: Any, url: str) -> int:
    """Every message of a queue: visible, in flight and delayed (exact in the emulator)."""
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(DEPTH))["Attributes"]
    return sum(int(v) for v in attributes.values())


def in_batches(sqs_call: Any, url: str, entries: list[dict[str, Any]]) -> None:
    """``sqs_call`` (a ``*_batch`` request) over ``entries``, ten at a time, as SQS takes them."""
    for start in range(0, len(entries), 10):
        chunk = entries[start : start + 10]
        sqs_call(QueueUrl=url, Entries=[{"Id": str(i), **entry} for i, entry in enumerate(chunk)])


class SqsPoller(Poller):
    mapping: Mapping

    def poll_events(self, worker: Worker, wait_seconds: int | None, abandon: threading.Event | None) -> int:
        """Receive up to ``BatchSize`` messages (long-polling ``wait_seconds``), invoke, settle."""
        sqs = self.context.emulator.client("sqs")
        response = sqs.receive_message(
            QueueUrl=self.mapping.queue_url,
            MaxNumberOfMessages=min(self.mapping.batch_size, 10),
            WaitTimeSeconds=self.wait(wait_seconds),
            **RECEIVE_ALL,
        )
        messages = response.get("Messages", [])
        if not messages:
            return 0
        event = lambda_sqs_event(messages, self.mapping.queue_arn)
        reply, cold_start = self.context.invoker.invoke(worker, self.mapping.function_arn, event)
        self._settle(sqs, messages, reply)
        if cold_start is not None:
            raise cold_start
        return len(messages)

    def _settle(self, sqs: Any, messages: list[dict[str, Any]], reply: dict[str, Any]) -> None:
        """Delete what succeeded, retry what failed (after ``retry_delay``), count, report."""
        mapping, retry_delay = self.mapping, self.context.retry_delay
        ids = [m["MessageId"] for m in messages]
        failed_ids, _ = self.failures(ids, reply)
        succeeded = [
            {"ReceiptHandle": m["ReceiptHandle"]} for m in messages if m["MessageId"] not in failed_ids
        ]
        in_batches(sqs.delete_message_batch, mapping.queue_url, succeeded)
        if retry_delay is not None:
            again = [
                {"ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": int(retry_delay)}
                for m in messages
                if m["MessageId"] in failed_ids
            ]
            in_batches(sqs.change_message_visibility_batch, mapping.queue_url, again)
        logs = reply.get("logs") or []
        groups = sorted({m.get("Attributes", {}).get("MessageGroupId") for m in messages} - {None})
        batch = Batch(
            function=mapping.function_name,
            message_ids=tuple(ids),
            groups=tuple(groups),
            outcomes=tuple(record_outcomes(ids, failed_ids, logs)),
            error=batch_error(reply),
        )
        last_receive = {
            m["MessageId"]
            for m in messages
            if mapping.max_receive_count
            and int(m.get("Attributes", {}).get("ApproximateReceiveCount", 1)) >= mapping.max_receive_count
        }
        self.context.accounts.account(batch, logs, failed=len(failed_ids), given_up=last_receive)

    def backlog(self) -> int:
        """The queue's messages: visible, in flight or delayed."""
        return queue_depth(self.context.emulator.client("sqs"), self.mapping.queue_url)


__all__ = ["DEPTH", "RECEIVE_ALL", "SqsPoller", "in_batches", "queue_depth"]
