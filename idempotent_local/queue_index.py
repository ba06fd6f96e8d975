"""SQS queues whose cost per request does not grow with their depth: an index beside each moto queue.

moto 5.2.5 keeps a queue's messages in one list and walks all of it on every request: a send builds the
queue's attribute dict (three counts, each over every message, on a clock read per message) four times; a
receive copies the list of visible messages, then builds that dict three more times per message it returns
(to read the retention period); a delete or a visibility change searches every message's receipt handles.
At 2,000 messages waiting a send or a receive took tens of milliseconds.

Beside each queue this module keeps what those requests look up (:class:`Index`: receipt handle -> message,
the messages still delayed), under the queue's own lock, and the ``sqs-depth-independent`` patch
(:mod:`idempotent_local.patches`) replaces moto's operations with these:

- a receive walks the queue from its oldest message and stops at its batch (passing over messages in flight,
  delayed, or of a FIFO group in flight);
- a delete and ChangeMessageVisibility find the message by its receipt handle;
- the approximate counts come from the messages in flight and the delayed ones (a message that is not
  visible is always in flight: moto's ``pending_messages``, kept so by ChangeMessageVisibility too);
- a long poll sleeps until a message is added, deleted or changes visibility, or the next message in flight
  or delayed becomes visible (moto loops on the whole queue while any message is visible, one of a busy FIFO
  group too).

Otherwise moto's behaviour, with two differences, both AWS's: a message past the retention period is
dropped when a receive reaches it (moto stops the receive there and leaves the message in flight), and a
message made invisible again by ChangeMessageVisibility after its timeout ran out is in flight, so it holds
its FIFO group. Deduplication is not the queue's business here: the ``fifo-deduplication`` patch decides
before a message is added (moto's own check, disabled by that patch, walked the queue on every send).
"""

from __future__ import annotations

import threading
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from moto.core.utils import unix_time, unix_time_millis
from moto.sqs.exceptions import InvalidParameterValue, ReceiptHandleIsInvalid
from moto.sqs.models import Message, _filter_message_attributes

MAX_VISIBILITY_SECONDS = 43200  # SQS: a message's total visibility timeout, from its send
WAIT_STEP_SECONDS = 1.0  # a long poll looks again at least this often (as moto does), whatever it waits for


@dataclass
class Index:
    """What requests look up in one queue; changed only under the queue's ``_messages_lock``."""

    handles: dict[str, Message] = field(default_factory=dict)  # every receipt handle of a message in it
    delayed: set[Message] = field(default_factory=set)  # messages added with a delay (pruned when counted)


_CREATING = threading.Lock()


def index(queue: Any) -> Index:
    found = vars(queue).get("_depth_index")
    if found is None:
        with _CREATING:
            found = vars(queue).setdefault("_depth_index", Index())
    return found


def remove(queue: Any, message: Message) -> None:
    """Take ``message`` out of ``queue`` (ValueError if it is not there). Call under the queue's lock."""
    queue._messages.remove(message)
    queue._pending_messages.discard(message)
    handles = index(queue).handles
    for handle in message.all_receipt_handles:
        handles.pop(handle, None)  # type: ignore[arg-type]


def add_message(queue: Any, message: Message) -> None:
    with queue._messages_lock:
        queue._messages.append(message)
        if message.delayed_until:
            index(queue).delayed.add(message)
        queue._messages_lock.notify_all()


def delete_message(queue: Any, receipt_handle: str) -> None:
    if receipt_handle in queue.deleted_messages:
        return  # deleted before: SQS accepts it again
    with queue._messages_lock:
        message = index(queue).handles.get(receipt_handle)
        if message is None:
            raise ReceiptHandleIsInvalid()
        remove(queue, message)
        queue.deleted_messages.update(message.all_receipt_handles)
        queue._messages_lock.notify_all()  # its FIFO group may go on


def change_message_visibility(queue: Any, receipt_handle: str, visibility_timeout: int) -> None:
    with queue._messages_lock:
        message = index(queue).handles.get(receipt_handle)
        if message is None:
            raise ReceiptHandleIsInvalid()
        until = unix_time_millis() + int(visibility_timeout) * 1000
        if until - message.sent_timestamp > MAX_VISIBILITY_SECONDS * 1000:  # type: ignore[operator]
            raise InvalidParameterValue(
                f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                f"VisibilityTimeout for the message is beyond the limit [{MAX_VISIBILITY_SECONDS} seconds]"
            )
        message.change_visibility(visibility_timeout)
        if message.visible:
            queue._pending_messages.discard(message)
        else:
            queue._pending_messages.add(message)  # in flight again: it holds its FIFO group
        queue._messages_lock.notify_all()


def forget_all(queue: Any) -> None:
    """After a purge: nothing of the queue is left to look up. Call under the queue's lock."""
    vars(queue)["_depth_index"] = Index()


class Counts(NamedTuple):
    visible: int
    in_flight: int
    delayed: int


def counts(queue: Any) -> Counts:
    """The three approximate counts, from the messages in flight and the delayed ones only."""
    now = unix_time_millis()
    with queue._messages_lock:
        in_flight = sum(1 for m in queue._pending_messages if now <= m.visible_at)
        found = index(queue)
        found.delayed = {m for m in found.delayed if now < m.delayed_until}
        delayed = len(found.delayed)
        return Counts(len(queue._messages) - in_flight - delayed, in_flight, delayed)


def move_to_dead_letter_queue(dead_letter_queue: Any, message: Message, source: Any) -> None:
    """Where the redrive policy puts a message (moto: as a send; the ``dead-letter-moves`` patch replaces
    this with what SQS does)."""
    dead_letter_queue.add_message(message)


def receive_message(
    queue: Any,
    count: int,
    wait_seconds: int,
    visibility_timeout: int,
    message_attribute_names: list[str] | None = None,
) -> list[Message]:
    """Up to ``count`` messages (copies, as moto returns them), long polling up to ``wait_seconds``."""
    deadline = unix_time() + wait_seconds
    while True:
        with queue._messages_lock:
            taken, dead = _take(queue, count, visibility_timeout, message_attribute_names or [])
            if not (taken or dead) and wait_seconds and unix_time() <= deadline:
                # Looked and waited under one hold of the lock: a change in between cannot be missed.
                queue._messages_lock.wait(_seconds_to_next_change(queue, deadline))
                continue
        for message in dead:  # outside the lock: the dead-letter queue takes its own
            with queue._messages_lock:
                try:
                    remove(queue, message)
                except ValueError:
                    continue  # deleted, or moved by another receive, meanwhile
            move_to_dead_letter_queue(queue.dead_letter_queue, message, queue)
        if taken or not wait_seconds or unix_time() > deadline:
            return taken


def _take(
    queue: Any, count: int, visibility_timeout: int, attribute_names: list[str]
) -> tuple[list[Message], list[Message]]:
    """The messages a receive returns (marked received) and those it must move to the dead-letter queue,
    walking from the oldest message; messages past the retention period are dropped. Under the lock."""
    busy = set(queue.pending_message_groups) if queue.fifo_queue else set()
    now = unix_time_millis()  # read after the groups in flight: nothing they released is invisible here
    policy = queue.redrive_policy if queue.dead_letter_queue is not None else None
    retention_ms = int(queue.message_retention_period) * 1000
    pending = queue._pending_messages
    taken: list[Message] = []
    dead: list[Message] = []
    expired: list[Message] = []
    for message in queue._messages:
        if now <= message.visible_at or now < message.delayed_until:
            continue
        if message in pending:  # visible again: its consumer let the visibility timeout run out
            pending.discard(message)
            if queue.fifo_queue:
                busy = set(queue.pending_message_groups)
        if message.sent_timestamp + retention_ms <= now:  # type: ignore[operator]
            expired.append(message)
        elif message.group_id in busy:
            continue  # an earlier message of its FIFO group is in flight
        elif policy and message.approximate_receive_count >= policy["maxReceiveCount"]:
            dead.append(message)
        else:
            pending.add(message)
            message.mark_received(visibility_timeout=visibility_timeout)
            index(queue).handles[message.receipt_handle] = message  # type: ignore[index]
            returned = deepcopy(message)
            _filter_message_attributes(returned, attribute_names)
            taken.append(returned)
            if len(taken) >= count:
                break
    for message in expired:
        remove(queue, message)
    return taken, dead


def _seconds_to_next_change(queue: Any, deadline: float) -> float:
    """How long a long poll may sleep: until the deadline, the next message in flight or delayed becomes
    visible, or ``WAIT_STEP_SECONDS``; an added, deleted or changed message wakes it earlier."""
    now = unix_time_millis()
    wake = [deadline * 1000, now + WAIT_STEP_SECONDS * 1000]
    wake += [m.visible_at for m in queue._pending_messages if m.visible_at >= now]
    wake += [m.delayed_until for m in index(queue).delayed if m.delayed_until > now]
    return max(min(wake) - now, 0.0) / 1000 + 0.001  # visible strictly after visible_at


__all__ = [
    "Counts",
    "Index",
    "add_message",
    "change_message_visibility",
    "counts",
    "delete_message",
    "forget_all",
    "index",
    "move_to_dead_letter_queue",
    "receive_message",
    "remove",
]
