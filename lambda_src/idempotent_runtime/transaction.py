"""transaction mode: the processor's DynamoDB writes and an idempotency marker in one TransactWriteItems."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from idempotent_runtime.batch import DUPLICATE, PROCESSED
from idempotent_runtime.errors import InvalidMessage, TransientError, error_code
from idempotent_runtime.message import Message
from idempotent_runtime.modes import ABSENT, Mode

# The marker lives beside the business items: same partition value, sort key prefixed, so it never collides
# with an item the processor writes under the message's own key.
MARKER_PREFIX = "idempotency#"
MAX_ENTRIES = 100  # DynamoDB's TransactWriteItems limit, the marker included
ACTIONS = ("Put", "Update", "Delete", "ConditionCheck")
# Cancellation reasons caused by the request itself: retrying the same entries gives the same answer. A
# ConditionalCheckFailed on the marker is a duplicate (decided first); on a processor's entry it is the
# processor's own condition (a business rule) failing. Every other code - TransactionConflict, throttling,
# ReplicatedWriteConflict, a code added later - is retried: nothing unexpected is permanent.
PERMANENT_REASONS = frozenset(
    {"ConditionalCheckFailed", "ValidationError", "ItemCollectionSizeLimitExceeded"}
)


class TransactionMode(Mode):
    """Processor: ``fn(message) -> list[dict]`` of low-level TransactWriteItems entries (at most 99);
    ``TableName`` may be left out (default: TABLE_NAME). The runtime appends the marker Put, conditional on
    the key being absent (or past its TTL), and commits everything in one request.

    Cancellation: the marker's condition failed -> duplicate (the marker proves the message committed before;
    other entries' conditions failing too is then expected). Otherwise, when every failed reason is a
    processor's condition, ValidationError or ItemCollectionSizeLimitExceeded -> permanent, with the reasons;
    any other reason (conflicts, throttling, codes not known here) -> retry.
    """

    name = "transaction"
    processor: Callable[[Message], Any]  # required in this mode (make_mode checks it)
    sort_reserve = len(MARKER_PREFIX)

    def marker_key(self, message: Message) -> dict[str, Any]:
        key = message.key
        assert key is not None
        return {self.pk: {"S": key.partition}, self.sk: {"S": MARKER_PREFIX + key.sort}}

    def process(self, message: Message, context: object | None = None) -> tuple[str, Any]:
        entries = self.processor(message)
        if not isinstance(entries, (list, tuple)):
            raise InvalidMessage(
                "transaction processor must return a list of TransactWriteItems entries, "
                f"got {type(entries).__name__}"
            )
        if len(entries) > MAX_ENTRIES - 1:
            raise InvalidMessage(
                f"transaction processor returned {len(entries)} entries, at most {MAX_ENTRIES - 1} fit"
            )
        now = int(self.clock())
        marker_key = self.marker_key(message)
        items = [self._entry(i, entry, marker_key) for i, entry in enumerate(entries)]
        marker = {**marker_key, "message_id": {"S": message.message_id}}
        if self.ttl_seconds:
            marker[self.ttl] = {"N": str(now + self.ttl_seconds)}
        items.append(
            {
                "Put": {
                    "TableName": self.table,
                    "Item": marker,
                    "ConditionExpression": ABSENT,
                    "ExpressionAttributeNames": {"#pk": self.pk, "#ttl": self.ttl},
                    "ExpressionAttributeValues": {":now": {"N": str(now)}},
                }
            }
        )
        try:
            self.dynamodb().transact_write_items(TransactItems=items)
        except Exception as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            return self._cancelled(exc, len(items) - 1)
        return PROCESSED, None

    def _entry(self, index: int, entry: Any, marker_key: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in ACTIONS:
            raise InvalidMessage(
                f"transaction entry {index} must be a dict with one of {', '.join(ACTIONS)}, "
                f"got {entry!r:.120}"
            )
        ((action, body),) = entry.items()
        if not isinstance(body, dict):
            raise InvalidMessage(f"transaction entry {index} ({action}) must hold a dict, got {body!r:.120}")
        if "TableName" not in body:
            body = {**body, "TableName": self.table}
            entry = {action: body}
        target = body.get("Item") if action == "Put" else body.get("Key")
        if (
            body["TableName"] == self.table
            and isinstance(target, dict)
            and target.get(self.pk) == marker_key[self.pk]
            and target.get(self.sk) == marker_key[self.sk]
        ):
            raise InvalidMessage(f"transaction entry {index} ({action}) targets the idempotency marker's key")
        return entry

    def _cancelled(self, exc: Exception, marker_index: int) -> tuple[str, Any]:
        response = getattr(exc, "response", None)
        listed = response.get("CancellationReasons") if isinstance(response, dict) else None
        reasons = [r if isinstance(r, dict) else {} for r in listed] if isinstance(listed, list) else []
        codes = [r.get("Code") if isinstance(r.get("Code"), str) else "None" for r in reasons]
        if len(codes) > marker_index and codes[marker_index] == "ConditionalCheckFailed":
            return DUPLICATE, None
        failed = [
            (i, code, str(reasons[i].get("Message") or "")) for i, code in enumerate(codes) if code != "None"
        ]
        summary = "; ".join(f"entry {i}: {code}{' ' + msg if msg else ''}" for i, code, msg in failed)
        if not failed or any(code not in PERMANENT_REASONS for _, code, _ in failed):
            raise TransientError(f"transaction cancelled, retry later ({summary or 'no reasons given'})")
        raise InvalidMessage(f"transaction cancelled: {summary}")
