"""Permanent failures go to the dead-letter queue at once - once - with the reason, so their group goes on.

1. A redelivery (ApproximateReceiveCount > 1) writes the quarantine record ``(KEY_PREFIX +
   "idempotency#quarantine#" + messageId, "idempotency#quarantine")`` as SENDING, unless it says SENT
   (then the send is skipped).
2. The DLQ send: the body, the message attributes that fit, ``idempotency.reason`` and ``.details``.
3. The record is deleted from its source queue, so neither a dying invocation nor SQS's redrive brings it
   back.
4. The quarantine record says SENT where a redelivery is still possible: the delete failed, or a standard
   queue (before the delete: it may deliver a deleted message again). From a FIFO queue: no DynamoDB request.

Only a death between 2 and 3 (4) sends a second copy (a FIFO DLQ drops it within 5 minutes). A send whose
outcome is unknown (timeout, reset, 5xx) is retried on purpose, though a standard DLQ then keeps two copies:
not retrying would not spare one (the record would come back, find no SENT record, be sent again) and would
risk the record. Readers count a dead letter once by its details' source_message_id (docs/runtime.md).
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from idempotent_runtime.config import Config
from idempotent_runtime.contract import (
    DLQ_ATTRIBUTE_PREFIX,
    DLQ_DETAILS_ATTRIBUTE,
    DLQ_REASON_ATTRIBUTE,
    FIFO_QUEUE_SUFFIX,
    MAX_MESSAGE_ATTRIBUTES,
    MAX_REASON_CHARACTERS,
    MESSAGE_ID_ATTRIBUTE,
    QUARANTINE_PARTITION_PREFIX,
    QUARANTINE_SORT,
    QUARANTINE_TTL_SECONDS,
    REASON_ATTRIBUTE,
    REDRIVE_ATTRIBUTE,
    SQS_CHARACTERS,
    SQS_MAX_MESSAGE_BYTES,
    SQS_MESSAGE_BYTES,
    STATUS_ATTRIBUTE,
    DeadLetterKind,
    QuarantineStatus,
)
from idempotent_runtime.errors import Resource, error_text, is_conditional_check_failed, too_large
from idempotent_runtime.message import Key, Message
from idempotent_runtime.retries import Retrier

# What SQS does not accept in a body or a string attribute value: escaped here, refused by outbox.check.
# Compiled on first use: the character class costs milliseconds to compile, at every cold start otherwise.
UNSAFE = f"[^{SQS_CHARACTERS}]"


def sqs_safe(text: str, limit: int = MAX_REASON_CHARACTERS) -> str:
    """``text`` as SQS accepts it in an attribute: control characters (except tab, LF, CR), U+FFFE, U+FFFF
    and lone surrogates written as ``\\uXXXX``; at most ``limit`` characters; never empty."""
    safe = re.sub(UNSAFE, lambda found: f"\\u{ord(found.group()):04x}", text)
    if len(safe) > limit:
        safe = safe[: limit - 3] + "..."
    return safe or "unknown"


def queue_url(arn: Any, endpoint_url: str) -> str | None:
    """The URL of the queue ``arn:aws:sqs:<region>:<account>:<name>`` at the SQS client's endpoint."""
    if not isinstance(arn, str):
        return None
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs" or not parts[4] or not parts[5]:
        return None
    return f"{endpoint_url.rstrip('/')}/{parts[4]}/{parts[5]}"


class SendFailed(Exception):
    """The quarantine could not happen; ``where`` is the resource that failed."""

    def __init__(self, where: Resource, error: Exception) -> None:
        super().__init__(f"{where}: {error_text(error)}")
        self.where = where
        self.error = error


class Sent(NamedTuple):
    dropped: list[str]  # original attributes not copied
    already: bool  # an earlier delivery had sent it: skipped
    warnings: list[tuple[str, dict[str, Any]]]  # steps after the send that failed (nothing lost)


class Quarantine:
    """Sends a record to ``DLQ_URL`` once (see the module docstring). Raises :class:`SendFailed` when the
    quarantine record's first write or the send fails: the caller then reports a batch item failure
    (nothing is lost)."""

    def __init__(
        self,
        config: Config,
        sqs: Callable[[], Any],
        dynamodb: Callable[[], Any],
        *,
        calls: Retrier | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        assert config.dlq_url is not None
        self.config = config
        self.dlq_url = config.dlq_url
        self.fifo = self.dlq_url.endswith(FIFO_QUEUE_SUFFIX)
        self._sqs = sqs
        self._dynamodb = dynamodb
        self.calls = calls or Retrier()
        self.clock = clock
        self.pk, self.sk, self.ttl = config.partition_key, config.sort_key, config.ttl_attribute
        ttl = config.dedup_ttl_seconds
        self.ttl_seconds = max(ttl, QUARANTINE_TTL_SECONDS) if ttl else 0

    def record_key(self, message_id: str) -> dict[str, Any]:
        partition = self.config.key_prefix + QUARANTINE_PARTITION_PREFIX + message_id
        return {self.pk: {"S": partition}, self.sk: {"S": QUARANTINE_SORT}}

    def send(
        self,
        message: Message,
        reason: str,
        kind: DeadLetterKind,
        extra: dict[str, Any] | None = None,
    ) -> Sent:
        """``extra``: more details (a conflict's fingerprints, a processor's error type and location)."""
        warnings: list[tuple[str, dict[str, Any]]] = []
        safe_reason = sqs_safe(reason)
        already = False
        if message.receive_count > 1:
            try:
                already = self._remember(message, safe_reason, QuarantineStatus.SENDING)
            except Exception as exc:
                raise SendFailed(Resource.TABLE, exc) from exc
        dropped: list[str] = []
        if not already:
            attributes, dropped = self._attributes(message)
            details = {
                "kind": kind.value,
                "source_message_id": message.message_id,
                "group_id": message.group_id,
                "dedup_id": message.dedup_id,
                "key": _key(message.key),
                "fingerprint": None,
                "stored_fingerprint": None,
                "receive_count": message.receive_count,
                "function": self.config.function_name,
                "dropped_attributes": dropped,
                **(extra or {}),
            }
            sent = self._send(message, attributes, details, safe_reason)
            if DLQ_DETAILS_ATTRIBUTE not in sent or sent.get(DLQ_REASON_ATTRIBUTE, {}).get("StringValue") != (
                safe_reason
            ):
                warnings.append(
                    (
                        "the message leaves no room beside it in the dlq for its whole reason and "
                        "details: the dead letter carries what fitted (see idempotency.details "
                        "'shortened'); the whole reason is this line's",
                        {"reason": safe_reason, "sent": sorted(sent)},
                    )
                )
        # A standard queue may deliver a deleted message again: remember the send before deleting.
        remember = not already and message.from_fifo_queue is not True
        if remember:
            self._remember_sent(message, safe_reason, warnings)
        if not self._delete_from_source(message, warnings) and not already and not remember:
            self._remember_sent(message, safe_reason, warnings)
        return Sent(dropped, already, warnings)

    def _send(
        self, message: Message, kept: dict[str, Any], details: dict[str, Any], reason: str
    ) -> dict[str, Any]:
        """Send the copy sized by :func:`fit`; after a size refusal, the smallest copy, once. Returns the
        attributes sent."""
        body = message.body or " "  # SQS rejects an empty body
        request: dict[str, Any] = {"QueueUrl": self.dlq_url, "MessageBody": body}
        if self.fifo:
            request["MessageGroupId"] = message.group_id or message.message_id
            request["MessageDeduplicationId"] = message.message_id[:128]
        # The DLQ takes at least what the source queue took (the constructs make both alike): a queue of the
        # default size within its limit; a larger one's limit is unknown up to SQS's, so a refusal is answered
        # with the smallest copy, then with what fits in the size the source took.
        source = size(body, kept)
        budget = SQS_MESSAGE_BYTES if source <= SQS_MESSAGE_BYTES else SQS_MAX_MESSAGE_BYTES
        attempts = (budget, 0, source) if budget != SQS_MESSAGE_BYTES else (budget, 0)
        for attempt in attempts:  # 0: the smallest copy
            request["MessageAttributes"] = fit(body, kept, details, reason, attempt)
            try:
                self.calls(self._sqs().send_message, **request)
                return request["MessageAttributes"]
            except Exception as exc:
                if attempt == attempts[-1] or not too_large(exc):
                    raise SendFailed(Resource.DLQ, exc) from exc
        raise AssertionError("the last attempt is sent or refused")

    def _remember_sent(
        self, message: Message, reason: str, warnings: list[tuple[str, dict[str, Any]]]
    ) -> None:
        try:
            self._remember(message, reason, QuarantineStatus.SENT)
        except Exception as exc:
            warnings.append(
                (
                    "quarantine not recorded after the dlq send: a redelivery of this record would send "
                    "it again",
                    {"error": error_text(exc)},
                )
            )

    def _remember(self, message: Message, reason: str, status: QuarantineStatus) -> bool:
        """Write the quarantine record; for SENDING, return True instead when it already says SENT."""
        now = self.clock()
        item = {
            **self.record_key(message.message_id),
            STATUS_ATTRIBUTE: {"S": status.value},
            MESSAGE_ID_ATTRIBUTE: {"S": message.message_id},
            REASON_ATTRIBUTE: {"S": reason},
        }
        if self.ttl_seconds:
            item[self.ttl] = {"N": str(int(now) + self.ttl_seconds)}
        request: dict[str, Any] = {"TableName": self.config.table_name, "Item": item}
        if status == QuarantineStatus.SENDING:
            request.update(
                ConditionExpression="attribute_not_exists(#pk) OR #ttl < :now OR #status <> :sent",
                ExpressionAttributeNames={"#pk": self.pk, "#ttl": self.ttl, "#status": STATUS_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":now": {"N": str(int(now))},
                    ":sent": {"S": QuarantineStatus.SENT.value},
                },
            )
        try:
            self.calls(self._dynamodb().put_item, **request)
        except Exception as exc:
            if status == QuarantineStatus.SENDING and is_conditional_check_failed(exc):
                return True
            raise
        return False

    def _delete_from_source(self, message: Message, warnings: list[tuple[str, dict[str, Any]]]) -> bool:
        """Delete the record from its source queue; False when it could not be (SQS may deliver it again)."""
        handle = message.record.get("receiptHandle")
        if not isinstance(handle, str) or not handle:
            return False
        try:
            sqs = self._sqs()
            url = queue_url(message.record.get("eventSourceARN"), sqs.meta.endpoint_url)
            if url is None:
                return False
            self.calls(sqs.delete_message, QueueUrl=url, ReceiptHandle=handle)
        except Exception as exc:
            warnings.append(
                (
                    "quarantined record not deleted from its source queue: SQS may deliver it again, the "
                    "quarantine record keeps it from reaching the dlq twice",
                    {"error": error_text(exc)},
                )
            )
            return False
        return True

    @staticmethod
    def _attributes(message: Message) -> tuple[dict[str, Any], list[str]]:
        """The original attributes that fit beside the runtime's two, and the names of those that do not.
        ``idempotency.redrive`` goes first: a message redriven before keeps its original key next time."""
        attributes: dict[str, Any] = {}
        dropped: list[str] = []
        room = MAX_MESSAGE_ATTRIBUTES - 2
        incoming = message.message_attributes
        ordered = sorted(incoming.items(), key=lambda pair: pair[0] != REDRIVE_ATTRIBUTE)
        for name, value in ordered:
            if name.startswith(DLQ_ATTRIBUTE_PREFIX) and name != REDRIVE_ATTRIBUTE:
                dropped.append(name)  # the runtime's own names: never taken from the input
                continue
            converted = sendable(value)
            if converted is None or len(attributes) >= room:
                dropped.append(name)
                continue
            attributes[name] = converted
        return attributes, dropped


def size(body: str, attributes: Mapping[str, Mapping[str, Any]]) -> int:
    """What SNS and SQS count against a message's maximum size: the body, every attribute's name, type and
    value (of attributes not yet checked too)."""
    total = len(body.encode("utf-8", "surrogatepass"))
    for name, value in attributes.items():
        data = value.get("StringValue")
        data = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else value.get("BinaryValue")
        total += len(name) + len(str(value.get("DataType", ""))) + len(data or b"")
    return total


SHORTENED_DETAILS = ("key", "fingerprint", "stored_fingerprint", "error_location")
SHORT_REASON_CHARACTERS = 100


def fit(body: str, kept: dict[str, Any], details: dict[str, Any], reason: str, budget: int) -> dict[str, Any]:
    """The copy's attributes within ``budget`` bytes with the body (0: the smallest copy): first the
    producer's go, largest first, ``idempotency.redrive`` last (named in ``dropped_attributes``), then the
    details' longest values (named in ``shortened``), then the reason is cut. Shrinks its arguments."""

    def copy() -> dict[str, Any]:
        text = json.dumps(details, separators=(",", ":"))  # ASCII: always safe
        return {**kept, DLQ_REASON_ATTRIBUTE: string(reason), DLQ_DETAILS_ATTRIBUTE: string(text)}

    largest = sorted(kept, key=lambda name: (name == REDRIVE_ATTRIBUTE, -size("", {name: kept[name]})))
    for name in largest:
        if size(body, copy()) <= budget:
            return copy()
        del kept[name]
        details["dropped_attributes"].append(name)
    if size(body, copy()) > budget:
        details["shortened"] = [name for name in SHORTENED_DETAILS if details.pop(name, None) is not None]
    if size(body, copy()) > budget:
        reason = sqs_safe(reason, SHORT_REASON_CHARACTERS)
    if not budget or size(body, copy()) <= budget:
        return copy()
    return _tightest(details, reason, budget - size(body, {}))


# Shorter than this, a reason says nothing: the details give way first.
MIN_REASON_BYTES = 24
_SAY_SO = "..."


def _tightest(details: dict[str, Any], reason: str, room: int) -> dict[str, Any]:
    """A message within a few hundred bytes of the limit: what fits beside it in ``room`` bytes. The kind
    and source message id with the reason cut to fit, else the reason alone cut to fit, else nothing (the
    reason is in the log line and the quarantine record). A cut reason ends in '...'; cut details say
    ``"shortened": "all"``."""
    reason_name = len(DLQ_REASON_ATTRIBUTE) + len("String")
    least = {"kind": details["kind"], "source_message_id": details["source_message_id"], "shortened": "all"}
    for kept in (least, None):
        attributes = (
            {} if kept is None else {DLQ_DETAILS_ATTRIBUTE: string(json.dumps(kept, separators=(",", ":")))}
        )
        left = room - size("", attributes) - reason_name
        if left >= MIN_REASON_BYTES:
            return {DLQ_REASON_ATTRIBUTE: string(_cut(reason, left)), **attributes}
    return {}


def _cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` bytes of UTF-8, ending in '...' when cut."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    return data[: limit - len(_SAY_SO)].decode("utf-8", "ignore") + _SAY_SO


def string(value: str) -> dict[str, str]:
    """A String message attribute."""
    return {"DataType": "String", "StringValue": value}


def _key(key: Key | None) -> dict[str, str] | None:
    return key.as_dict() if key is not None else None


def sendable(value: Any) -> dict[str, Any] | None:
    """A message attribute as Lambda's event (stringValue, binaryValue in base64) or ReceiveMessage gives
    it, in SendMessage's shape; None when it is neither."""
    if not isinstance(value, dict):
        return None
    data_type = value.get("dataType") or value.get("DataType")
    if not data_type:
        return None
    text = value.get("stringValue", value.get("StringValue"))
    if text is not None:
        return {"DataType": data_type, "StringValue": text}
    binary = value.get("binaryValue", value.get("BinaryValue"))
    if binary is not None:
        try:
            raw = base64.b64decode(binary) if isinstance(binary, str) else bytes(binary)
        except (ValueError, TypeError):
            return None
        return {"DataType": data_type, "BinaryValue": raw}
    return None
