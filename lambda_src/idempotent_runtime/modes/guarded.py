"""guarded mode: effects outside DynamoDB behind a fenced IN_PROGRESS lease. The processor runs at most once
at a time per key, and again only if its environment dies (or loses its lease) between the effect and the
key's completion - with the same ``message.key.idempotency_key`` (docs/runtime.md, "guarded").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from idempotent_runtime.contract import (
    DEDUP_ID_ATTRIBUTE,
    FINGERPRINT_ATTRIBUTE,
    LEASE_ATTRIBUTE,
    LEGACY_LEASE_ATTRIBUTE,
    LEGACY_MESSAGE_ID_ATTRIBUTE,
    LEGACY_OWNER_ATTRIBUTE,
    LEGACY_RESULT_ATTRIBUTE,
    LEGACY_STATUS_ATTRIBUTE,
    MESSAGE_ID_ATTRIBUTE,
    OUTBOX_ATTRIBUTE,
    OWNER_ATTRIBUTE,
    RESULT_ATTRIBUTE,
    STATUS_ATTRIBUTE,
    GuardedStatus,
    Mode,
    Outcome,
)
from idempotent_runtime.errors import (
    Conflict,
    InvalidMessage,
    LeaseLost,
    TransientError,
    classify,
    error_code,
    error_text,
    is_conditional_check_failed,
    old_item,
    safe_error_text,
)
from idempotent_runtime.keys import written_for
from idempotent_runtime.message import Key, Message
from idempotent_runtime.modes.base import (
    ABSENT,
    BaseMode,
    Done,
    RecordState,
    cancellation_reasons,
    new_token,
    number_of,
    reason_code,
    text_of,
)
from idempotent_runtime.payload import decode_result, encode_result

if TYPE_CHECKING:
    from idempotent_runtime.outbox import Outbox

IN_PROGRESS = GuardedStatus.IN_PROGRESS.value
COMPLETED = GuardedStatus.COMPLETED.value
# Lease when neither LEASE_SECONDS nor a Lambda context says how long the invocation may run.
DEFAULT_LEASE_SECONDS = 900
MAX_RESULT_BYTES = 100 * 1024
# Completion is retried while time is left before the owner's horizon (and the invocation's deadline); this
# caps the attempts should a clock stand still.
COMPLETION_ATTEMPTS = 1000

# Claimable: no record, a record past its TTL, or an IN_PROGRESS claim whose (recorded) lease has expired
# - also a claim written by 0.1 under its attribute names - made for the same payload (or before
# fingerprints existed): the effect of an expired claim may have run, so only its own payload may take it
# over; another payload is a conflict, decided from the old item the failed condition returns.
CLAIM = (
    ABSENT
    + " OR (((#status = :in_progress AND #lease < :now_ms)"
    + " OR (#old_status = :in_progress AND #old_lease < :now_ms))"
    + " AND (attribute_not_exists(#fingerprint) OR #fingerprint = :fingerprint))"
)
# What 0.1 wrote on a guarded record (a claim removes them when it takes one over).
LEGACY_ATTRIBUTES = (
    LEGACY_STATUS_ATTRIBUTE,
    LEGACY_OWNER_ATTRIBUTE,
    LEGACY_LEASE_ATTRIBUTE,
    LEGACY_RESULT_ATTRIBUTE,
    LEGACY_MESSAGE_ID_ATTRIBUTE,
)
# Only the current owner (fencing token) of a live claim may complete, extend or release it.
OWNED = "#owner = :token AND #status = :in_progress"
OWNER_NAMES = {"#owner": OWNER_ATTRIBUTE, "#status": STATUS_ATTRIBUTE}


def owned_update(token: str, assigned: dict[str, tuple[str, Any]], then: str = "") -> dict[str, Any]:
    """An UpdateItem's expression, condition, names and values setting ``assigned`` (placeholder ->
    (attribute, value)), ``then`` after (REMOVE #lease), only while ``token`` owns the live claim."""
    return {
        "UpdateExpression": "SET " + ", ".join(f"#{p} = :{p}" for p in assigned) + then,
        "ConditionExpression": OWNED,
        "ExpressionAttributeNames": {
            **OWNER_NAMES,
            "#lease": LEASE_ATTRIBUTE,
            **{f"#{p}": name for p, (name, _) in assigned.items()},
        },
        "ExpressionAttributeValues": {
            ":token": {"S": token},
            ":in_progress": {"S": IN_PROGRESS},
            **{f":{p}": value for p, (_, value) in assigned.items()},
        },
    }


def _refused(exc: BaseException) -> dict[str, Any] | None:
    """The record a refused completion found (alone or as a transaction's first entry), or None."""
    if is_conditional_check_failed(exc):
        return old_item(exc)
    reasons = cancellation_reasons(exc) if error_code(exc) == "TransactionCanceledException" else []
    if reasons and reason_code(reasons[0]) == "ConditionalCheckFailed":
        item = reasons[0].get("Item")
        return item if isinstance(item, dict) else {}
    return None


def claim_expiry(now: float, ttl_seconds: int, lease_end_ms: int) -> int:
    """The TTL of an IN_PROGRESS claim (epoch seconds): now + DEDUP_TTL_SECONDS, never before its lease ends.

    The claim condition treats a record past its TTL as absent (and DynamoDB may delete it), so a claim
    expiring before its lease would let a second delivery claim the key and run the effect concurrently.
    """
    return max(int(now) + ttl_seconds, -(-lease_end_ms // 1000) + 1)


class Lease:
    """The claim this invocation holds on ``message.key`` while the processor runs: ``remaining()`` seconds
    by its own clock; ``extend(seconds)`` holds it at least that long from now, a fenced update raising
    :class:`~idempotent_runtime.errors.LeaseLost` once another invocation took the key over. Others see it
    held ``LEASE_MARGIN_SECONDS`` longer, so a clock running ahead cannot take over a live claim.
    """

    def __init__(self, mode: GuardedMode, key: Key, token: str, horizon_ms: int) -> None:
        self._mode = mode
        self.key = key
        self.token = token
        self.horizon_ms = horizon_ms

    @property
    def expires_at(self) -> float:
        """Epoch seconds at which the claim stops being this invocation's."""
        return self.horizon_ms / 1000

    def remaining(self) -> float:
        return self.expires_at - self._mode.clock()

    def extend(self, seconds: float) -> float:
        """Hold the claim at least ``seconds`` from now (its TTL moves with it); returns ``remaining()``."""
        if not seconds > 0:
            raise ValueError(f"lease extension must be a positive number of seconds, got {seconds!r}")
        mode = self._mode
        now = mode.clock()
        horizon_ms = max(self.horizon_ms, int((now + seconds) * 1000))
        recorded_ms = horizon_ms + mode.margin_ms
        assigned = {"lease": (LEASE_ATTRIBUTE, {"N": str(recorded_ms)})}
        if mode.config.dedup_ttl_seconds:
            expires = claim_expiry(now, mode.config.dedup_ttl_seconds, recorded_ms)
            assigned["ttl"] = (mode.ttl, {"N": str(expires)})
        try:
            mode.calls(
                mode.dynamodb().update_item,
                TableName=mode.table,
                Key=mode.item_key(self.key),
                **owned_update(self.token, assigned),
            )
        except Exception as exc:
            if is_conditional_check_failed(exc):
                raise LeaseLost(f"lease on key {self.key} was taken over by another invocation") from None
            raise
        self.horizon_ms = horizon_ms
        return self.remaining()


class GuardedMode(BaseMode):
    """Claim (a conditional UpdateItem: IN_PROGRESS, lease, owner token), run the processor, complete (an
    UpdateItem if still the owner); on an exception release (a DeleteItem if the owner) so a retry runs.
    The processor's small JSON result is stored (Decimals exactly) and returned for duplicates. Requests:
    a new key 2, a duplicate or conflict 1.
    """

    name = Mode.GUARDED
    processor: Callable[[Message], Any]  # required in this mode (make_mode checks it)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lease_seconds = self.config.lease_seconds
        self.margin_ms = self.config.lease_margin_seconds * 1000
        self.claim_names = {
            **self.names,
            "#status": STATUS_ATTRIBUTE,
            "#lease": LEASE_ATTRIBUTE,
            "#old_status": LEGACY_STATUS_ATTRIBUTE,
            "#old_lease": LEGACY_LEASE_ATTRIBUTE,
            "#fingerprint": FINGERPRINT_ATTRIBUTE,
            "#owner": OWNER_ATTRIBUTE,
            "#message_id": MESSAGE_ID_ATTRIBUTE,
            "#result": RESULT_ATTRIBUTE,
            "#outbox": OUTBOX_ATTRIBUTE,
            "#dedup_id": DEDUP_ID_ATTRIBUTE,
        }
        # The claim writes the whole record, removing what a record it takes over held beyond it: its
        # result, where its emitted messages were, the deduplication id it was written for when this message
        # has none, 0.1's attributes - except a name the table uses for its key or TTL (DynamoDB refuses to
        # remove a key attribute, or to set and remove one path) - and the TTL when there is none.
        claim_set = "#status = :in_progress, #owner = :token, #lease = :lease, #message_id = :message_id, "
        claim_set += "#fingerprint = :fingerprint"
        removed = ["#result", "#outbox"]
        own = {self.pk, self.sk, self.ttl}
        for index, legacy in enumerate(LEGACY_ATTRIBUTES):
            if legacy not in own:
                removed.append(f"#legacy{index}")
                self.claim_names[f"#legacy{index}"] = legacy
        if self.config.dedup_ttl_seconds:
            claim_set += ", #ttl = :ttl"
        else:
            removed.append("#ttl")
        # (claim of a message without a deduplication id, claim of one with)
        self.claim_updates = (
            f"SET {claim_set} REMOVE {', '.join([*removed, '#dedup_id'])}",
            f"SET {claim_set}, #dedup_id = :dedup_id REMOVE {', '.join(removed)}",
        )

    def location(self, key: Key) -> dict[str, Any]:
        return self.item_key(key)

    def state(self, item: dict[str, Any], fingerprint: str, now: float) -> tuple[RecordState, str | None]:
        if not item or self.expired(item, now):
            return RecordState.NEW, None
        status = text_of(item, STATUS_ATTRIBUTE, LEGACY_STATUS_ATTRIBUTE)
        stored = text_of(item, FINGERPRINT_ATTRIBUTE)
        if status == IN_PROGRESS:
            lease = number_of(item, LEASE_ATTRIBUTE, LEGACY_LEASE_ATTRIBUTE)
            if lease is None or lease >= int(now * 1000):
                return RecordState.IN_PROGRESS, stored
            if stored is None or stored == fingerprint:
                return RecordState.NEW, stored  # its own payload takes an expired claim over
            return RecordState.CONFLICT, stored
        if status == COMPLETED or status is None:  # None: another mode's record (a document)
            if stored is None or stored == fingerprint:
                return RecordState.DONE, stored
            return RecordState.CONFLICT, stored
        return RecordState.INVALID, stored

    def lease_ms(self, context: object | None) -> int:
        if self.lease_seconds is not None:
            return self.lease_seconds * 1000
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        if remaining is not None:
            return max(int(remaining()), 1000)
        return DEFAULT_LEASE_SECONDS * 1000

    def process(self, message: Message, context: object | None = None) -> Done:
        key = message.key
        assert key is not None
        fingerprint = self.fingerprint(message)
        now = self.clock()
        now_ms = int(now * 1000)
        token = new_token()
        horizon_ms = now_ms + self.lease_ms(context)
        recorded_ms = horizon_ms + self.margin_ms
        item_key = self.item_key(key)
        values = {
            ":now": {"N": str(int(now))},
            ":now_ms": {"N": str(now_ms)},
            ":in_progress": {"S": IN_PROGRESS},
            ":fingerprint": {"S": fingerprint},
            ":token": {"S": token},
            ":lease": {"N": str(recorded_ms)},
            ":message_id": {"S": message.message_id},
        }
        dedup_id = written_for(message)
        if dedup_id:
            values[":dedup_id"] = {"S": dedup_id}
        if self.config.dedup_ttl_seconds:
            values[":ttl"] = {"N": str(claim_expiry(now, self.config.dedup_ttl_seconds, recorded_ms))}
        # An UpdateItem names the item by its whole key: a table keyed otherwise refuses the claim before the
        # effect runs (a PutItem would be stored, and only the completion refused).
        old = self.conditional(
            self.dynamodb().update_item,
            item_key,
            Key=item_key,
            UpdateExpression=self.claim_updates[bool(dedup_id)],
            ConditionExpression=CLAIM,
            ExpressionAttributeNames=self.claim_names,
            ExpressionAttributeValues=values,
        )
        # Our own token: a retried claim whose first attempt was applied (response lost). We hold it.
        if old is not None and (
            text_of(old, OWNER_ATTRIBUTE) != token or text_of(old, STATUS_ATTRIBUTE) != IN_PROGRESS
        ):
            return self._existing(key, old, fingerprint, now_ms)

        lease = Lease(self, key, token, horizon_ms)
        message.lease = lease
        outbox = self.open_outbox(message)
        try:
            result = self.processor(message)
        except Exception:
            self._release(lease)
            raise
        self._complete(lease, message, result, outbox)
        return Done(Outcome.PROCESSED, result)

    def _existing(self, key: Key, old: dict[str, Any], fingerprint: str, now_ms: int) -> Done:
        status = text_of(old, STATUS_ATTRIBUTE, LEGACY_STATUS_ATTRIBUTE)
        if status == COMPLETED:
            stored = text_of(old, RESULT_ATTRIBUTE, LEGACY_RESULT_ATTRIBUTE)
            try:
                result = decode_result(stored) if stored is not None else None
            except (ValueError, RecursionError):
                result = None
            return self.done(key, fingerprint, old, result)
        if status == IN_PROGRESS:
            lease = number_of(old, LEASE_ATTRIBUTE, LEGACY_LEASE_ATTRIBUTE)
            stored = text_of(old, FINGERPRINT_ATTRIBUTE)
            if lease is not None and lease < now_ms and stored is not None and stored != fingerprint:
                # Expired, but another payload's: its effect may have run, only its own payload may retry.
                return self.conflict(Conflict(key, fingerprint, stored, claimed=True))
            raise TransientError(f"key {key} is in progress in another invocation (lease until {lease} ms)")
        if status is None and old:
            # Done in another mode (a document, after IDEMPOTENCY_MODE changed): by its fingerprint.
            return self.done(key, fingerprint, old)
        raise InvalidMessage(
            f"key {key} is held by an item that is not an idempotency record (status {status!r})"
        )

    def _complete(self, lease: Lease, message: Message, result: Any, outbox: Outbox | None) -> None:
        key = lease.key
        said = {"key": str(key), "message_id": message.message_id}  # on each warning of the completion
        stored = self._encode(result, said)
        emits = outbox if outbox is not None and outbox.count else None

        def completion(now: float) -> dict[str, Any]:
            """The completion's UpdateItem of an attempt at ``now`` (with where its outbox items are)."""
            assigned: dict[str, tuple[str, Any]] = {"status": (STATUS_ATTRIBUTE, {"S": COMPLETED})}
            if emits is not None:
                assigned["outbox"] = (OUTBOX_ATTRIBUTE, emits.where(now))
            if stored is not None:
                assigned["result"] = (RESULT_ATTRIBUTE, {"S": stored})
            if self.config.dedup_ttl_seconds:
                assigned["ttl"] = (self.ttl, {"N": str(int(now) + self.config.dedup_ttl_seconds)})
            return {
                "TableName": self.table,
                "Key": self.item_key(key),
                **owned_update(lease.token, assigned, " REMOVE #lease"),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }

        try:
            # Until shortly before the claim stops being ours (or the invocation ends): giving up earlier
            # would leave the key IN_PROGRESS, and the next delivery would run the effect again.
            self._commit(lease, completion, emits)
        except Exception as exc:
            old = _refused(exc)
            if old is not None:
                if (
                    text_of(old, STATUS_ATTRIBUTE) == COMPLETED
                    and text_of(old, OWNER_ATTRIBUTE) == lease.token
                ):
                    return  # an earlier attempt was applied but its response was lost
                self.warn(
                    "lease lost: the effect ran but another invocation owns the key now; completion refused "
                    "(nothing emitted)",
                    **said,
                )
                raise LeaseLost(
                    f"lease on key {key} expired and was taken over; completion refused"
                ) from None
            self.warn(
                "effect ran but its completion was not stored; the key stays IN_PROGRESS until its lease "
                "expires, then a retry runs the effect again (with the same idempotency key)",
                **said,
                error=error_text(exc),
            )
            failure = classify(exc)
            if failure.misconfigured:
                raise
            # Never permanent: the effect ran, so the message must not reach the DLQ as if it had not.
            raise TransientError(f"completion of key {key} failed: {failure.reason}") from exc

    def _commit(self, lease: Lease, completion: Callable[[float], dict], emits: Outbox | None) -> None:
        """The completion of ``completion(now)``; with the outbox items, in one TransactWriteItems
        (:meth:`transact`: a retry after a lost answer meets the record completed with the owner token)."""
        retry: dict[str, Any] = {
            "attempts": COMPLETION_ATTEMPTS,
            "time_left": lambda: lease.expires_at - self.clock(),
        }
        if emits is None:
            self.calls(self.dynamodb().update_item, **retry, **completion(self.clock()))
            return
        self.transact(lambda now: [{"Update": completion(now)}, *self.outbox_items(emits, now)], **retry)

    def _encode(self, result: Any, said: dict[str, str]) -> str | None:
        try:
            text = encode_result(result)
        except Exception as exc:  # whatever the result's own code raises: the key completes regardless
            self.warn("result not stored: it cannot be written as JSON", **said, error=safe_error_text(exc))
            return None
        if len(text) > MAX_RESULT_BYTES // 4 and len(text.encode("utf-8")) > MAX_RESULT_BYTES:
            self.warn(f"result not stored: over {MAX_RESULT_BYTES} bytes", **said)
            return None
        return text

    def _release(self, lease: Lease) -> None:
        try:
            self.calls(
                self.dynamodb().delete_item,
                TableName=self.table,
                Key=self.item_key(lease.key),
                ConditionExpression=OWNED,
                ExpressionAttributeNames=OWNER_NAMES,
                ExpressionAttributeValues={":token": {"S": lease.token}, ":in_progress": {"S": IN_PROGRESS}},
            )
        except Exception as exc:
            if not is_conditional_check_failed(exc):
                self.warn(
                    "claim not released; a retry waits for its lease to expire",
                    key=str(lease.key),
                    error=error_text(exc),
                )
