"""transaction mode: the processor's DynamoDB writes and an idempotency marker in one TransactWriteItems."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from idempotent_runtime.contract import (
    DEDUP_ID_ATTRIBUTE,
    FINGERPRINT_ATTRIBUTE,
    MARKER_SORT_PREFIX,
    MAX_TRANSACTION_ITEMS,
    MESSAGE_ID_ATTRIBUTE,
    OUTBOX_ATTRIBUTE,
    RESERVED_KEY_PREFIX,
    SORT_KEY,
    TOKEN_ATTRIBUTE,
    Mode,
    Outcome,
)
from idempotent_runtime.errors import (
    InvalidMessage,
    Misconfiguration,
    PermanentError,
    TransientError,
    error_code,
)
from idempotent_runtime.keys import written_for
from idempotent_runtime.message import Key, Message
from idempotent_runtime.modes.base import (
    ABSENT,
    BaseMode,
    Done,
    cancellation_reasons,
    new_token,
    reason_code,
)

ACTIONS = ("Put", "Update", "Delete", "ConditionCheck")
# Cancellation reasons caused by the request itself: retrying the same entries gives the same answer. A
# ConditionalCheckFailed on the marker is a duplicate (decided first); on a processor's entry it is the
# processor's own condition (a business rule) failing. Every other code - TransactionConflict, throttling,
# ReplicatedWriteConflict, a code added later - is retried: nothing unexpected is permanent.
PERMANENT_REASONS = frozenset(
    {"ConditionalCheckFailed", "ValidationError", "ItemCollectionSizeLimitExceeded"}
)


class TransactionMode(BaseMode):
    """Processor: ``fn(message) -> list[dict]``, at most 99 TransactWriteItems entries (``TableName``
    defaults to TABLE_NAME), committed in one request with the marker Put (p, ``idempotency#`` + s),
    conditional on the key being absent or expired. Entries writing a sort key beginning with
    ``idempotency#`` in the runtime's table are rejected (ConditionCheck is allowed). Cancelled: a failed
    marker condition's old item decides (our token: processed; same fingerprint or none: duplicate; else a
    conflict); else only processor conditions, ValidationError or ItemCollectionSizeLimitExceeded ->
    permanent; any other reason -> retry.
    """

    name = Mode.TRANSACTION
    processor: Callable[[Message], Any]  # required in this mode (make_mode checks it)
    sort_reserve = len(MARKER_SORT_PREFIX)

    def location(self, key: Key) -> dict[str, Any]:
        return {self.pk: {"S": key.partition}, self.sk: {"S": MARKER_SORT_PREFIX + key.sort}}

    def process(self, message: Message, context: object | None = None) -> Done:
        key = message.key
        assert key is not None
        # Before the processor, which may change the parsed body it is handed.
        fingerprint = self.fingerprint(message)
        outbox = self.open_outbox(message)
        entries = self.processor(message)
        if not isinstance(entries, (list, tuple)):
            raise InvalidMessage(
                "transaction processor must return a list of TransactWriteItems entries, "
                f"got {type(entries).__name__}"
            )
        if len(entries) > MAX_TRANSACTION_ITEMS - 1:
            raise InvalidMessage(
                f"transaction processor returned {len(entries)} entries, "
                f"at most {MAX_TRANSACTION_ITEMS - 1} fit"
            )
        marker_key = self.location(key)
        written = [self._entry(i, entry, marker_key) for i, entry in enumerate(entries)]
        token = new_token()
        marker = {
            **marker_key,
            MESSAGE_ID_ATTRIBUTE: {"S": message.message_id},
            FINGERPRINT_ATTRIBUTE: {"S": fingerprint},
            TOKEN_ATTRIBUTE: {"S": token},
        }
        dedup_id = written_for(message)
        if dedup_id:
            marker[DEDUP_ID_ATTRIBUTE] = {"S": dedup_id}
        emits = outbox if outbox is not None and outbox.count else None

        def request(now: float) -> list[dict[str, Any]]:
            """The transaction of an attempt at ``now``: the entries, the outbox items, the marker."""
            expires = self.expiry(self.config.dedup_ttl_seconds, now)
            stamped = {**marker, self.ttl: expires} if expires is not None else dict(marker)
            if emits is not None:
                stamped[OUTBOX_ATTRIBUTE] = emits.where(now)
            put = {
                "TableName": self.table,
                "Item": stamped,
                "ConditionExpression": ABSENT,
                "ExpressionAttributeNames": dict(self.names),
                "ExpressionAttributeValues": {":now": {"N": str(int(now))}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
            return [*written, *self.outbox_items(emits, now), {"Put": put}]

        items = request(self.clock())
        if emits is not None:
            _check_limits(items, len(entries))
        try:
            self.transact(request)
        except Exception as exc:
            if error_code(exc) == "ValidationException" and _ONE_ITEM_TWICE in str(exc):
                raise self._one_item_twice(items) from exc
            if error_code(exc) != "TransactionCanceledException":
                raise
            return self._cancelled(exc, len(items) - 1, key, marker_key, fingerprint, token)
        return Done(Outcome.PROCESSED)

    def _one_item_twice(self, items: list[dict[str, Any]]) -> Exception:
        """Two operations on one item, though each entry on our table has its own (pk, sk): the table is
        keyed otherwise (the deployment is wrong); else the entries repeat an item (the message is)."""
        keys, others = [], []
        for item in items:
            ((action, body),) = item.items()
            target = body.get("Item") if action == "Put" else body.get("Key")
            if self._same_table(body.get("TableName")) and isinstance(target, dict):
                keys.append(repr((target.get(self.pk), target.get(self.sk))))
            else:
                others.append(_table_name(str(body.get("TableName"))))
        # Two entries on another table (whose key we do not know) may be the one item: the message's.
        if len(keys) != len(set(keys)) or len(others) != len(set(others)):
            return InvalidMessage("transaction entries operate on one item twice (dynamodb allows once)")
        return Misconfiguration(
            f"dynamodb found two operations on one item among entries whose ({self.pk}, {self.sk}) all "
            "differ: the table's key is not that pair",
            self.key_hint(
                SORT_KEY, self.sk, "a transaction's entries were one item", "its partition key alone"
            ),
        )

    def _same_table(self, name: Any) -> bool:
        """Whether ``name`` (a table name or ARN, as DynamoDB accepts either) is the runtime's table."""
        return isinstance(name, str) and _table_name(name) == _table_name(self.table)

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
        if self._same_table(body["TableName"]) and isinstance(target, dict):
            if target.get(self.pk) == marker_key[self.pk] and target.get(self.sk) == marker_key[self.sk]:
                raise InvalidMessage(
                    f"transaction entry {index} ({action}) targets the idempotency marker's key"
                )
            for role, name in (("sort", self.sk), ("partition", self.pk)):
                value = target.get(name)
                text = value.get("S") if isinstance(value, dict) else None
                if action == "ConditionCheck" or not isinstance(text, str):
                    continue
                # The outbox's partitions begin with it after KEY_PREFIX: the relay publishes what is there.
                own = text.removeprefix(self.config.key_prefix) if role == "partition" else text
                if text.startswith(RESERVED_KEY_PREFIX) or own.startswith(RESERVED_KEY_PREFIX):
                    raise InvalidMessage(
                        f"transaction entry {index} ({action}) writes {role} key {text[:80]!r} of the "
                        f"runtime's table, which begins with {RESERVED_KEY_PREFIX!r}: those are the "
                        "runtime's own records"
                    )
        return entry

    def _cancelled(
        self,
        exc: Exception,
        marker_index: int,
        key: Key,
        marker_key: dict[str, Any],
        fingerprint: str,
        token: str,
    ) -> Done:
        reasons = cancellation_reasons(exc)
        codes = [reason_code(reason) for reason in reasons]
        if len(codes) > marker_index and codes[marker_index] == "ConditionalCheckFailed":
            old = reasons[marker_index].get("Item")
            old = old if isinstance(old, dict) else {}
            self.same_key(marker_key, old)
            if self.ours(old, token):
                return Done(Outcome.PROCESSED)
            return self.done(key, fingerprint, old)
        failed = [
            (i, code, str(reasons[i].get("Message") or "")) for i, code in enumerate(codes) if code != "None"
        ]
        summary = "; ".join(f"entry {i}: {code}{' ' + msg if msg else ''}" for i, code, msg in failed)
        if not failed or any(code not in PERMANENT_REASONS for _, code, _ in failed):
            raise TransientError(f"transaction cancelled, retry later ({summary or 'no reasons given'})")
        if all(code == "ConditionalCheckFailed" for _, code, _ in failed):
            raise PermanentError(f"transaction cancelled: {summary}")  # the processor's own condition
        raise InvalidMessage(f"transaction cancelled: {summary}")


def _check_limits(items: list[dict[str, Any]], entries: int) -> None:
    """``items`` (``entries`` from the processor, outbox items, the marker) within TransactWriteItems'
    limits, or a named error."""
    from idempotent_runtime.attributes import item_size
    from idempotent_runtime.outbox import MAX_TRANSACTION_BYTES, TransactionTooLarge

    outbox = len(items) - entries - 1
    parts = f"{entries} from the processor, {outbox} outbox item(s) for the emitted messages and the marker"
    if len(items) > MAX_TRANSACTION_ITEMS:
        raise TransactionTooLarge(
            f"the transaction would hold {len(items)} items ({parts}); TransactWriteItems takes at most "
            f"{MAX_TRANSACTION_ITEMS}"
        )
    # What DynamoDB can be known to count before it runs: the items put, the other entries' keys and values.
    size = sum(
        item_size(value)
        for entry in items
        for body in entry.values()
        for part in ("Item", "Key", "ExpressionAttributeValues")
        if isinstance(value := body.get(part), dict)
    )
    if size > MAX_TRANSACTION_BYTES:
        raise TransactionTooLarge(
            f"the transaction would hold at least {size} bytes ({parts}); TransactWriteItems takes at most "
            f"{MAX_TRANSACTION_BYTES}"
        )


# DynamoDB's ValidationException when two entries of a transaction are one item.
_ONE_ITEM_TWICE = "multiple operations on one item"


def _table_name(name: str) -> str:
    """A table's name from its name or ARN (``arn:aws:dynamodb:<region>:<account>:table/<name>``)."""
    if name.startswith("arn:"):
        _, found, rest = name.partition(":table/")
        if found:
            return rest.split("/", 1)[0]
    return name
