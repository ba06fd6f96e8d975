"""What the idempotency modes share: the table's names, the clock, the payload fingerprint, the rule
that a record past its TTL counts as absent, and what a failed condition's old item means."""

from __future__ import annotations

import itertools
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from idempotent_runtime.config import Config
from idempotent_runtime.contract import (
    FINGERPRINT_ATTRIBUTE,
    PARTITION_KEY,
    SORT_KEY,
    STATUS_ATTRIBUTE,
    TOKEN_ATTRIBUTE,
    GuardedStatus,
    Mode,
    OnConflict,
    Outcome,
)
from idempotent_runtime.errors import (
    Conflict,
    InvalidMessage,
    Misconfiguration,
    TransientError,
    error_code,
    is_conditional_check_failed,
    is_retryable,
    old_item,
)
from idempotent_runtime.message import Key, Message
from idempotent_runtime.payload import Fingerprinter, raw_fingerprint
from idempotent_runtime.retries import Retrier

if TYPE_CHECKING:
    from idempotent_runtime.outbox import Outbox

# DynamoDB deletes expired items up to ~48 h after their TTL: every condition treats such a record as absent.
ABSENT = "attribute_not_exists(#pk) OR #ttl < :now"

Warn = Callable[..., None]

# TransactWriteItems cancellation reasons worth another attempt within the invocation (nothing was written).
RETRYABLE_REASONS = frozenset(
    {
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
        "InternalServerError",
        "TransactionInProgress",
    }
)


def cancellation_reasons(exc: BaseException) -> list[dict[str, Any]]:
    """The CancellationReasons of a TransactionCanceledException, one per entry (``{}`` when absent)."""
    response = getattr(exc, "response", None)
    listed = response.get("CancellationReasons") if isinstance(response, dict) else None
    return [r if isinstance(r, dict) else {} for r in listed] if isinstance(listed, list) else []


def reason_code(reason: dict[str, Any]) -> str:
    code = reason.get("Code")
    return code if isinstance(code, str) else "None"


def transaction_retryable(exc: BaseException) -> bool:
    if error_code(exc) == "TransactionCanceledException":
        codes = {reason_code(reason) for reason in cancellation_reasons(exc)} - {"None"}
        return bool(codes) and codes <= RETRYABLE_REASONS
    return is_retryable(exc)


class Done(NamedTuple):
    """What a mode made of a record: the outcome, the processor's result (guarded), the conflict when the
    key was done with another payload and ``ON_CONFLICT=duplicate`` made it a duplicate, and why (stale:
    the versions)."""

    outcome: Outcome
    result: Any = None
    conflict: Conflict | None = None
    reason: str | None = None


class RecordState(StrEnum):
    """What the table says about a key (see :mod:`idempotent_runtime.records`)."""

    NEW = "new"  # no idempotency record (or an expired one): a delivery would process it
    DONE = "done"  # done with the same payload (or a record without fingerprint): a duplicate
    CONFLICT = "conflict"  # done with another payload (guarded: or held by its expired claim)
    IN_PROGRESS = "in_progress"  # guarded: claimed by a live invocation
    STALE = "stale"  # versioned: the key holds a newer version; a delivery writes nothing
    INVALID = "invalid"  # the message cannot be keyed


# A token is unique, not secret: 96 random bits per execution environment, then a counter. One random read
# per process instead of one per record: a system call per record also hands the GIL to another group's
# thread every time.
_TOKEN_PREFIX = os.urandom(12).hex()
_TOKEN_COUNTER = itertools.count()


def _new_token_source() -> None:
    """A forked process draws its own prefix: it must never repeat its parent's tokens."""
    global _TOKEN_PREFIX, _TOKEN_COUNTER
    _TOKEN_PREFIX = os.urandom(12).hex()
    _TOKEN_COUNTER = itertools.count()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_token_source)


def new_token() -> str:
    """A unique 128-bit token (hex): identifies one write of this invocation, or a guarded claim's owner."""
    return f"{_TOKEN_PREFIX}{next(_TOKEN_COUNTER):08x}"


def text_of(item: dict[str, Any], *names: str, kind: str = "S") -> str | None:
    """The first attribute of ``item`` among ``names`` of type ``kind`` (a string), as its text."""
    for name in names:
        value = item.get(name)
        if isinstance(value, dict) and isinstance(value.get(kind), str):
            return value[kind]
    return None


def number_of(item: dict[str, Any], *names: str) -> int | None:
    """The whole part of the first number attribute of ``item`` among ``names``."""
    text = text_of(item, *names, kind="N")
    try:
        return int(text.split(".")[0]) if text is not None else None
    except ValueError:
        return None


class BaseMode(ABC):
    """Base of the modes: ``process(message, context) -> Done`` writes the message's effect once per key."""

    name: ClassVar[Mode]
    # Bytes of the sort key a mode reserves for itself (the transaction marker's prefix).
    sort_reserve: ClassVar[int] = 0

    def __init__(
        self,
        config: Config,
        dynamodb: Callable[[], Any],
        processor: Callable[[Message], Any] | None,
        *,
        clock: Callable[[], float] = time.time,
        calls: Retrier | None = None,
        warn: Warn | None = None,
    ) -> None:
        self.config = config
        self.table = config.table_name
        self.pk, self.sk, self.ttl = config.partition_key, config.sort_key, config.ttl_attribute
        self.names = {"#pk": self.pk, "#ttl": self.ttl}
        self.dynamodb = dynamodb
        self.processor = processor
        self.clock = clock
        self.calls = calls or Retrier()
        self.warn: Warn = warn or (lambda message, **fields: None)
        self.fingerprints = Fingerprinter(config.fingerprint_fields, config.fingerprint_exclude)

    @abstractmethod
    def process(self, message: Message, context: object | None = None) -> Done:
        """Apply the message's effect unless its key is done; never run an effect twice for one key."""

    @abstractmethod
    def location(self, key: Key) -> dict[str, Any]:
        """The DynamoDB key of the item that records whether ``key`` is done."""

    def open_outbox(self, message: Message) -> Outbox | None:
        """Before the processor: where ``message.emit()`` collects (None without EMIT_TARGET_ARN)."""
        if not self.config.emit_target_arn:
            return None
        from idempotent_runtime.outbox import outbox_for  # only for consumers that emit

        config = self.config
        return outbox_for(config.emit_target_arn, config.table_name, config.key_prefix, message)

    def outbox_items(self, outbox: Outbox | None, now: float) -> list[dict[str, Any]]:
        """The outbox items to commit with the effect at ``now`` (its marker or completion records where
        they are: ``outbox.where(now)``)."""
        if outbox is None or not outbox.count:
            return []
        names = (self.pk, self.sk, self.ttl)
        return outbox.items(self.table, names, self.config.dedup_ttl_seconds, now)

    def transact(self, request: Callable[[float], list[dict[str, Any]]], **retry: Any) -> None:
        """One TransactWriteItems of ``request(now)``, ``now`` taken again at each attempt: the outbox items'
        commit time (their sort key) is the attempt's that commits. Each attempt is a request of its own (no
        ClientRequestToken): a retry after a lost answer meets that attempt's record, with our token."""
        write = self.dynamodb().transact_write_items
        self.calls(
            lambda: write(TransactItems=request(self.clock())), retryable=transaction_retryable, **retry
        )

    def conditional(self, operation: Callable[..., Any], own: dict[str, Any], **request: Any) -> dict | None:
        """``operation(**request)`` (PutItem, UpdateItem) on our table, under its condition: None when it
        wrote, else the item as it was (``ALL_OLD``), which must be at the key written (``own``)."""
        request.update(TableName=self.table, ReturnValuesOnConditionCheckFailure="ALL_OLD")
        try:
            self.calls(operation, **request)
        except Exception as exc:
            if not is_conditional_check_failed(exc):
                raise
            old = old_item(exc)
            self.same_key(own, old)
            return old
        return None

    def delivery_state(
        self, message: Message | None, item: dict[str, Any], fingerprint: str, now: float
    ) -> tuple[RecordState, str | None]:
        """What ``item`` means for a delivery of ``message`` with ``fingerprint`` (``message`` None: of the
        stored payload, a key asked about): :meth:`state`, unless the mode compares more of the message."""
        return self.state(item, fingerprint, now)

    def fingerprint(self, message: Message) -> str:
        """SHA-256 of the canonical JSON body (of the chosen fields); of the raw body when it is not JSON.

        Every mode computes it before the processor runs (a processor may change ``message.data`` in
        place), so it is the fingerprint of the body as delivered - what :mod:`records` computes too."""
        try:
            data = message.data
        except InvalidMessage:
            return raw_fingerprint(message.body)
        return self.fingerprints(data)

    def item_key(self, key: Key) -> dict[str, Any]:
        return {self.pk: {"S": key.partition}, self.sk: {"S": key.sort}}

    def expiry(self, seconds: int, now: float) -> dict[str, str] | None:
        """The TTL attribute value ``seconds`` from ``now``; None for 0 (never expire)."""
        return {"N": str(int(now) + seconds)} if seconds else None

    def expired(self, item: dict[str, Any], now: float) -> bool:
        expires = number_of(item, self.ttl)
        return expires is not None and expires < int(now)

    def done(self, key: Key, fingerprint: str, old: dict[str, Any], result: Any = None) -> Done:
        """The key is done (a record exists): a duplicate, or a conflict when the stored fingerprint differs.
        A record without one (written by 0.1) counts as the same payload."""
        if text_of(old, STATUS_ATTRIBUTE) == GuardedStatus.IN_PROGRESS:  # claimed in guarded mode: not done
            raise TransientError(f"key {key} is claimed by guarded mode (IN_PROGRESS) and not yet done")
        stored = text_of(old, FINGERPRINT_ATTRIBUTE)
        if stored is None or stored == fingerprint:
            return Done(Outcome.DUPLICATE, result)
        return self.conflict(Conflict(key, fingerprint, stored))

    def conflict(self, conflict: Conflict) -> Done:
        """A conflict, per ON_CONFLICT: raised (quarantined) or a duplicate without a result."""
        if self.config.on_conflict == OnConflict.DUPLICATE:
            # The stored result belongs to another payload: it is not returned as this message's.
            return Done(Outcome.DUPLICATE, None, conflict)
        raise conflict

    def same_key(self, written: dict[str, Any], old: dict[str, Any]) -> None:
        """Raise :class:`Misconfiguration` when the old item a failed condition returned is not at the key
        written: the table's key schema lacks SORT_KEY (a table keyed on the partition key alone, such as
        an imported one) or PARTITION_KEY, so another key's record would pass for this key's duplicate or
        conflict."""
        if not old:
            return
        for variable, name, keyed_on in (
            (SORT_KEY, self.sk, "its partition key alone"),
            (PARTITION_KEY, self.pk, "other attributes"),
        ):
            if old.get(name) != written.get(name):
                raise Misconfiguration(
                    f"the conditional write at {self._shown_key(written)} found the item at "
                    f"{self._shown_key(old)}: another key, so the table's key is not ({self.pk}, {self.sk})",
                    self.key_hint(variable, name, "a conditional write found an item", keyed_on),
                )

    def key_hint(self, variable: Any, name: str, found: str, keyed_on: str) -> str:
        """The ERROR line's hint for a table keyed otherwise than (PARTITION_KEY, SORT_KEY)."""
        return (
            f"the table's key does not include {variable.name} {name!r}: {found} with another {name} value, "
            f"as on a table keyed on {keyed_on} (an imported table?); the table needs the string partition "
            f"key {self.pk!r} ({PARTITION_KEY.name}) and sort key {self.sk!r} ({SORT_KEY.name})"
        )

    def _shown_key(self, item: dict[str, Any]) -> str:
        return ", ".join(f"{name} {_shown_value(item.get(name))}" for name in (self.pk, self.sk))

    @staticmethod
    def ours(old: dict[str, Any], token: str) -> bool:
        """The old item is this invocation's own write (applied, but its response was lost)."""
        return text_of(old, TOKEN_ATTRIBUTE) == token

    def state(self, item: dict[str, Any], fingerprint: str, now: float) -> tuple[RecordState, str | None]:
        """What the stored idempotency record ``item`` (``{}``: none) means for a message with
        ``fingerprint``: the state and the stored fingerprint. Document and transaction records: present and
        unexpired means done (or conflict)."""
        if not item or self.expired(item, now):
            return RecordState.NEW, None
        stored = text_of(item, FINGERPRINT_ATTRIBUTE)
        if text_of(item, STATUS_ATTRIBUTE) == GuardedStatus.IN_PROGRESS:
            return RecordState.IN_PROGRESS, stored
        if stored is None or stored == fingerprint:
            return RecordState.DONE, stored
        return RecordState.CONFLICT, stored


def _shown_value(value: Any) -> str:
    if value is None:
        return "(absent)"
    if isinstance(value, dict) and isinstance(value.get("S"), str):
        return repr(value["S"][:80])
    return f"{value!r:.80}"
