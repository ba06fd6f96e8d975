"""guarded mode: effects outside DynamoDB run at most once per key, behind a fenced IN_PROGRESS lease."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from idempotent_runtime.batch import DUPLICATE, PROCESSED
from idempotent_runtime.config import Config
from idempotent_runtime.errors import (
    InvalidMessage,
    TransientError,
    describe,
    error_code,
    is_conditional_check_failed,
    permanent_reason,
)
from idempotent_runtime.message import Message
from idempotent_runtime.modes import ABSENT, Mode

IN_PROGRESS = "IN_PROGRESS"
COMPLETED = "COMPLETED"
# Record attributes besides the key and the TTL.
STATUS, OWNER, LEASE, RESULT, MESSAGE_ID = "status", "owner", "lease_expires_at", "result", "message_id"
# Lease when neither LEASE_SECONDS nor a Lambda context says how long the invocation may run.
DEFAULT_LEASE_SECONDS = 900
MAX_RESULT_BYTES = 100 * 1024
_COMPLETE_ATTEMPTS = 3

# Claimable: no record, a record past its TTL, or an IN_PROGRESS claim whose lease has expired.
CLAIM = ABSENT + " OR (#status = :in_progress AND #lease < :now_ms)"
# Only the current owner (fencing token) of a live claim may complete or release it.
OWNED = "#owner = :token AND #status = :in_progress"


def claim_expiry(now: int, ttl_seconds: int, lease_end_ms: int) -> int:
    """The TTL of an IN_PROGRESS claim (epoch seconds): now + TTL_SECONDS, but never before its lease ends.

    The claim condition treats a record past its TTL as absent (and DynamoDB may delete it), so a claim
    expiring before its lease would let a second delivery claim the key and run the effect concurrently.
    """
    return max(now + ttl_seconds, -(-lease_end_ms // 1000) + 1)


class LeaseLost(TransientError):
    """Our claim expired and another invocation took the key over; our completion was refused."""


class GuardedMode(Mode):
    """Claim (PutItem IN_PROGRESS, lease, owner token) -> run the processor -> complete (UpdateItem if owner).

    Processor: ``fn(message) -> result``, performs the side effect and returns a small JSON-serialisable
    result, stored with the COMPLETED record and returned for duplicates without running the function again.
    On an exception the claim is released (DeleteItem if owner) so a retry runs.
    """

    name = "guarded"
    processor: Callable[[Message], Any]  # required in this mode (make_mode checks it)

    def __init__(
        self,
        config: Config,
        dynamodb: Callable[[], Any],
        processor: Callable[[Message], Any],
        clock: Callable[[], float] = time.time,
        warn: Callable[..., None] | None = None,
    ) -> None:
        super().__init__(config, dynamodb, processor, clock)
        self.lease_seconds = config.lease_seconds
        self.warn = warn or (lambda message, **fields: None)
        self.names = {**self.names, "#status": STATUS, "#lease": LEASE}
        self.owner_names = {"#owner": OWNER, "#status": STATUS}

    def lease_ms(self, context: object | None) -> int:
        if self.lease_seconds is not None:
            return self.lease_seconds * 1000
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        if remaining is not None:
            return max(int(remaining()), 1000)
        return DEFAULT_LEASE_SECONDS * 1000

    def process(self, message: Message, context: object | None = None) -> tuple[str, Any]:
        key = message.key
        assert key is not None
        dynamodb = self.dynamodb()
        now = self.clock()
        now_ms = int(now * 1000)
        token = os.urandom(16).hex()
        item_key = {self.pk: {"S": key.partition}, self.sk: {"S": key.sort}}
        lease_end_ms = now_ms + self.lease_ms(context)
        claim = {
            **item_key,
            STATUS: {"S": IN_PROGRESS},
            OWNER: {"S": token},
            LEASE: {"N": str(lease_end_ms)},
            MESSAGE_ID: {"S": message.message_id},
        }
        if self.ttl_seconds:
            claim[self.ttl] = {"N": str(claim_expiry(int(now), self.ttl_seconds, lease_end_ms))}
        try:
            dynamodb.put_item(
                TableName=self.table,
                Item=claim,
                ConditionExpression=CLAIM,
                ExpressionAttributeNames=self.names,
                ExpressionAttributeValues={
                    ":now": {"N": str(int(now))},
                    ":now_ms": {"N": str(now_ms)},
                    ":in_progress": {"S": IN_PROGRESS},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if not is_conditional_check_failed(exc):
                raise
            old = getattr(exc, "response", {}).get("Item") or {}
            # Our own token: a retried claim whose first attempt was applied (response lost). We hold it.
            if old.get(OWNER) != {"S": token} or old.get(STATUS) != {"S": IN_PROGRESS}:
                return self._existing(key, old)

        try:
            result = self.processor(message)
        except Exception:
            self._release(dynamodb, item_key, token, key)
            raise
        self._complete(dynamodb, item_key, token, key, message, result)
        return PROCESSED, result

    def _existing(self, key: object, old: dict[str, Any]) -> tuple[str, Any]:
        status = old.get(STATUS, {}).get("S")
        if status == COMPLETED:
            stored = old.get(RESULT, {}).get("S")
            return DUPLICATE, (json.loads(stored) if stored is not None else None)
        if status == IN_PROGRESS:
            lease = old.get(LEASE, {}).get("N", "?")
            raise TransientError(f"key {key} is in progress in another invocation (lease until {lease} ms)")
        raise InvalidMessage(
            f"key {key} is held by an item that is not an idempotency record (status {status!r})"
        )

    def _complete(
        self, dynamodb: Any, item_key: dict, token: str, key: object, message: Message, result: Any
    ) -> None:
        values: dict[str, Any] = {
            ":completed": {"S": COMPLETED},
            ":token": {"S": token},
            ":in_progress": {"S": IN_PROGRESS},
        }
        update = "SET #status = :completed"
        stored = self._encode(result, key, message)
        if stored is not None:
            update += ", #result = :result"
            values[":result"] = {"S": stored}
        if self.ttl_seconds:
            update += ", #ttl = :ttl"
            values[":ttl"] = {"N": str(int(self.clock()) + self.ttl_seconds)}
        update += " REMOVE #lease"
        names = {"#owner": OWNER, "#status": STATUS, "#lease": LEASE}
        if stored is not None:
            names["#result"] = RESULT
        if self.ttl_seconds:
            names["#ttl"] = self.ttl
        for attempt in range(_COMPLETE_ATTEMPTS):
            try:
                dynamodb.update_item(
                    TableName=self.table,
                    Key=item_key,
                    UpdateExpression=update,
                    ConditionExpression=OWNED,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return
            except Exception as exc:
                if is_conditional_check_failed(exc):
                    old = getattr(exc, "response", {}).get("Item") or {}
                    if old.get(STATUS) == {"S": COMPLETED} and old.get(OWNER) == {"S": token}:
                        return  # an earlier attempt was applied but its response was lost
                    self.warn(
                        "lease lost: the effect ran but another invocation owns the key now; "
                        "completion refused",
                        key=str(key),
                        message_id=message.message_id,
                    )
                    raise LeaseLost(
                        f"lease on key {key} expired and was taken over; completion refused"
                    ) from None
                if permanent_reason(exc) is not None or attempt == _COMPLETE_ATTEMPTS - 1:
                    self.warn(
                        "effect ran but its completion was not stored; the key stays IN_PROGRESS until "
                        "its lease expires, then a retry runs the effect again",
                        key=str(key),
                        message_id=message.message_id,
                        error=describe(exc),
                    )
                    raise TransientError(f"completion of key {key} failed: {describe(exc)}") from exc
                time.sleep(0.05 * (4**attempt))

    def _encode(self, result: Any, key: object, message: Message) -> str | None:
        try:
            text = json.dumps(result, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            self.warn(
                "result not stored: not json-serialisable",
                key=str(key),
                message_id=message.message_id,
                error=str(exc),
            )
            return None
        if len(text) > MAX_RESULT_BYTES // 4 and len(text.encode("utf-8")) > MAX_RESULT_BYTES:
            self.warn(
                f"result not stored: over {MAX_RESULT_BYTES} bytes",
                key=str(key),
                message_id=message.message_id,
            )
            return None
        return text

    def _release(self, dynamodb: Any, item_key: dict, token: str, key: object) -> None:
        try:
            dynamodb.delete_item(
                TableName=self.table,
                Key=item_key,
                ConditionExpression=OWNED,
                ExpressionAttributeNames=self.owner_names,
                ExpressionAttributeValues={":token": {"S": token}, ":in_progress": {"S": IN_PROGRESS}},
            )
        except Exception as exc:
            if not is_conditional_check_failed(exc):
                self.warn(
                    "claim not released; a retry waits for its lease to expire",
                    key=str(key),
                    error=describe(exc),
                    code=error_code(exc),
                )
