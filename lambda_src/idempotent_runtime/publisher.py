"""Producer helper: publish to a FIFO topic with deterministic deduplication ids, keeping each message
group's order when SNS refuses a message.

The deduplication id comes from business keys (``x#y``), not from the content, so a resend with a changed
body inside SNS's 5-minute window is still recognised; the consumer's conditional write covers the rest.
Key fields are read exactly as the consumer reads them (:mod:`idempotent_runtime.keys`: dotted paths,
numbers and booleans in their canonical text).

Order: a request carries at most one message of a group, and a group's next message is sent only after SNS
accepted the one before. After a failure the group stops: its later messages are not attempted, so sending
the unpublished messages again (``result.unpublished``), in order, keeps the group's order.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.keys import key_parts
from idempotent_runtime.message import join_key

MAX_BATCH = 10  # PublishBatch's limit


class Status(StrEnum):
    """What happened to one input message."""

    PUBLISHED = "published"  # SNS accepted it (result.message_ids holds its id)
    FAILED = "failed"  # SNS refused it, or its request failed (result.failed says why)
    NOT_ATTEMPTED = "not_attempted"  # not sent: an earlier message of its group failed, or the call stopped


@dataclass(frozen=True)
class PublishFailure:
    """One message SNS did not accept: its position in the input, group, dedup id, and SNS's error."""

    index: int
    group_id: str | None
    dedup_id: str | None
    code: str
    message: str
    sender_fault: bool

    def __repr__(self) -> str:
        fault = "sender" if self.sender_fault else "service"
        where = f"index={self.index}, group_id={self.group_id!r}, dedup_id={self.dedup_id!r}"
        return f"PublishFailure({where}, {self.code} ({fault} fault): {self.message})"


class PublishResult:
    """``statuses[i]`` says what happened to input ``i``; ``message_ids[i]`` is SNS's id for it (None unless
    published); ``failed`` lists the failures; ``unpublished`` the inputs to send again, in order."""

    def __init__(self, count: int) -> None:
        self.statuses: list[Status] = [Status.NOT_ATTEMPTED] * count
        self.message_ids: list[str | None] = [None] * count
        self.failed: list[PublishFailure] = []
        self.counts: dict[Status, int] = {status: 0 for status in Status}
        self.counts[Status.NOT_ATTEMPTED] = count

    def _set(self, index: int, status: Status) -> None:
        self.counts[self.statuses[index]] -= 1
        self.counts[status] += 1
        self.statuses[index] = status

    def _published(self, index: int, message_id: str | None) -> None:
        self.message_ids[index] = message_id
        self._set(index, Status.PUBLISHED)

    def _failed(self, entry: _Entry, code: str, text: str, sender_fault: bool) -> None:
        self._set(entry.index, Status.FAILED)
        failure = PublishFailure(entry.index, entry.group_id, entry.dedup_id, code, text, sender_fault)
        self.failed.append(failure)

    @property
    def ok(self) -> bool:
        return self.counts[Status.PUBLISHED] == len(self.statuses)

    @property
    def unpublished(self) -> list[int]:
        """The inputs that failed or were not attempted, in input order: publishing them again (in this
        order) keeps every group's order."""
        return [index for index, status in enumerate(self.statuses) if status is not Status.PUBLISHED]

    def raise_for_failures(self) -> None:
        if not self.ok:
            raise PublishError(self)


class PublishError(RuntimeError):
    def __init__(self, result: PublishResult) -> None:
        unpublished = len(result.unpublished)
        shown = "; ".join(map(repr, result.failed[:5]))
        super().__init__(
            f"{unpublished} message(s) not published ({len(result.failed)} failed, "
            f"{result.counts[Status.NOT_ATTEMPTED]} not attempted): {shown}"
        )
        self.result = result
        self.failed = result.failed


@dataclass(frozen=True)
class _Entry:
    index: int
    body: str
    group_id: str
    dedup_id: str


def dedup_id_for(message: Mapping[str, Any], key_fields: Sequence[str], separator: str = "#") -> str:
    """``x#y`` from the message's key fields (dotted paths; strings, numbers or booleans, read as the
    consumer reads them). When a part contains the separator (the join would be ambiguous: ``acct#1`` +
    ``p`` and ``acct`` + ``1#p``), or the result is over 128 characters or has characters SNS refuses, the
    SHA-256 of ``json.dumps([x, y])`` instead. With the consumer's key fields and no KEY_PREFIX this equals
    its ``message.key.idempotency_key``. Raises ValueError naming the field for a key the consumer would
    reject (missing, empty, null, an object or array, or beginning with ``idempotency#``)."""
    try:
        parts = key_parts(dict(message), key_fields)
    except InvalidMessage as exc:
        raise ValueError(exc.reason) from None
    return join_key(parts, separator)


def _entries(
    messages: Sequence[Any],
    group_id: str | Callable[[Mapping[str, Any]], str],
    key_fields: Sequence[str],
    separator: str,
) -> list[_Entry]:
    """Every message checked and prepared before anything is sent: a bad one raises ValueError naming it."""
    entries = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"message {index} must be a json object (dict), got {message!r:.80}")
        group = group_id(message) if callable(group_id) else group_id
        if not isinstance(group, str) or not group:
            raise ValueError(f"group id of message {index} must be a non-empty string, got {group!r}")
        try:
            dedup = dedup_id_for(message, key_fields, separator)
        except ValueError as exc:
            raise ValueError(f"message {index}: {exc}") from None
        entries.append(_Entry(index, json.dumps(message, separators=(",", ":")), group, dedup))
    return entries


def _rounds(entries: list[_Entry], result: PublishResult) -> Iterable[list[_Entry]]:
    """Requests of at most MAX_BATCH entries, at most one per group, earliest first; a group's next entry
    comes only after its previous one was published (read from ``result`` between requests)."""
    groups: dict[str, list[_Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.group_id, []).append(entry)
    position = dict.fromkeys(groups, 0)
    heads = [(members[0].index, group) for group, members in groups.items()]
    heapq.heapify(heads)
    while heads:
        batch = [heapq.heappop(heads) for _ in range(min(MAX_BATCH, len(heads)))]
        yield [groups[group][position[group]] for _, group in batch]
        for _, group in batch:
            sent = groups[group][position[group]]
            position[group] += 1
            if result.statuses[sent.index] is Status.PUBLISHED and position[group] < len(groups[group]):
                heapq.heappush(heads, (groups[group][position[group]].index, group))


def _send(sns_client: Any, topic_arn: str, batch: list[_Entry], result: PublishResult) -> bool:
    """One PublishBatch request; False when it failed as a whole (its entries are then failed)."""
    from botocore.exceptions import BotoCoreError, ClientError

    request = [
        {
            "Id": str(position),
            "Message": entry.body,
            "MessageGroupId": entry.group_id,
            "MessageDeduplicationId": entry.dedup_id,
        }
        for position, entry in enumerate(batch)
    ]
    try:
        response = sns_client.publish_batch(TopicArn=topic_arn, PublishBatchRequestEntries=request)
    except (BotoCoreError, ClientError) as exc:
        error = exc.response.get("Error", {}) if isinstance(exc, ClientError) else {}
        code = error.get("Code") or type(exc).__name__
        text = error.get("Message") or str(exc)
        for entry in batch:
            result._failed(entry, code, text, error.get("Type") == "Sender")
        return False
    for ok in response.get("Successful", []):
        result._published(batch[int(ok["Id"])].index, ok.get("MessageId"))
    for bad in response.get("Failed", []):
        code, text = bad.get("Code", "Unknown"), bad.get("Message", "")
        result._failed(batch[int(bad["Id"])], code, text, bool(bad.get("SenderFault")))
    return True


def publish(
    sns_client: Any,
    topic_arn: str,
    messages: Iterable[Mapping[str, Any]],
    *,
    group_id: str | Callable[[Mapping[str, Any]], str],
    key_fields: Sequence[str] = ("x", "y"),
    separator: str = "#",
) -> PublishResult:
    """Publish JSON messages to a FIFO topic through PublishBatch, each group in order.

    ``group_id``: a MessageGroupId, or a function of the message (e.g. ``lambda m: m["x"]`` to order per
    business entity while spreading load). Every message is checked before the first request: one the
    consumer would reject raises ValueError naming it, and nothing is sent. Each input ends published,
    failed (SNS refused it, or its request failed: the call then stops) or not attempted (an earlier
    message of its group failed, or the call stopped): see ``result.statuses``, ``result.failed``, and
    ``result.raise_for_failures()``.
    """
    items = list(messages)
    if not key_fields:
        raise ValueError(f"key_fields must name at least one body field, got {key_fields!r}")
    entries = _entries(items, group_id, key_fields, separator)
    result = PublishResult(len(items))
    for batch in _rounds(entries, result):
        if not _send(sns_client, topic_arn, batch, result):
            break
    return result
