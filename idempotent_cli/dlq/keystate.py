"""What the idempotency table says about a dead letter's key, through the runtime's own code.

``--dry-run`` asks :func:`idempotent_runtime.records.inspect` with the consumer's configuration (its
environment, read through ``Config.from_env``), so the tool keys a message exactly as the consumer will;
``--force`` deletes a done key's record with :func:`idempotent_runtime.records.forget`: only
while it is still the record inspected (a guarded claim a redelivery took over since is never deleted). A
redrive inspects a batch of dead letters at a time (:meth:`KeyTable.inspect_all`: one read for all).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from idempotent_runtime import records
from idempotent_runtime.config import Config
from idempotent_runtime.records import Inspection
from idempotent_runtime.records import RecordState as State

from idempotent_cli.dlq.letters import Outgoing, lambda_record
from idempotent_cli.errors import DlqError

# What a redrive means for a message in each state, for the dry-run lines.
MEANING = {
    State.NEW: "new: a redrive processes it",
    State.DONE: "done: a redrive would be a duplicate (--force processes it again)",
    State.CONFLICT: "conflict: done with a different payload; a redrive is quarantined again or counted as a "
    "duplicate, per ON_CONFLICT (--force replaces the stored outcome)",
    State.IN_PROGRESS: "in progress: a claim on the key is held; a redrive waits for it",
    State.STALE: "stale: the key holds a newer version; a redrive writes nothing (counted stale)",
    State.INVALID: "invalid: the consumer cannot key it; a redrive sends it back to the DLQ",
}
# States whose record --force deletes before the redrive.
FORCED = (State.DONE, State.CONFLICT)

# What forgetting a key means, per mode (docs/operations.md says the same).
FORGET_MEANING = {
    "document": "the stored document is deleted; the redriven message stores its own",
    "transaction": "the marker is deleted; the processor's writes apply again",
    "guarded": "the completed record is deleted; the processor's effect runs again",
    "versioned": "the stored state is deleted; the redriven message stores its own version",
}


class KeyTable:
    """The consumer's idempotency table, seen with the consumer's configuration."""

    def __init__(self, environment: Mapping[str, str], dynamodb: Any, *, queue_arn: str, region: str) -> None:
        try:
            self.config = Config.from_env(dict(environment))
        except ValueError as exc:  # ConfigurationError
            raise DlqError(f"the consumer's configuration does not parse: {exc}") from None
        self.dynamodb = dynamodb
        self.queue_arn, self.region = queue_arn, region

    @property
    def mode(self) -> str:
        return str(self.config.mode)

    @property
    def table_name(self) -> str:
        return str(self.config.table_name)

    def record(self, message: Outgoing, *, message_id: str) -> dict[str, Any]:
        """The record Lambda's event source would hand the consumer for ``message``."""
        return lambda_record(message, message_id=message_id, queue_arn=self.queue_arn, region=self.region)

    def key_of(self, message: Outgoing, *, message_id: str) -> tuple[Any, str | None]:
        """The key the consumer gives ``message`` (the runtime's Key), or None and why it cannot key it."""
        return records.key_of(self.config, self.record(message, message_id=message_id))

    def inspect(self, message: Outgoing, *, message_id: str, compare_payload: bool = True) -> Inspection:
        """What the table says about ``message``'s key; ``compare_payload=False`` when ``message`` only
        carries the key (its payload is unknown: the state is never ``conflict``)."""
        record = self.record(message, message_id=message_id)
        return records.inspect(self.config, self.dynamodb, record, compare_payload=compare_payload)

    def inspect_all(self, messages: list[tuple[Outgoing, str]]) -> list[Inspection]:
        """:meth:`inspect` of each (message, message id), the items they read fetched together: consistent
        BatchGetItem requests of 100 keys, instead of a GetItem each."""
        received = [self.record(message, message_id=message_id) for message, message_id in messages]
        reads = _Reads(self.dynamodb, self.table_name)
        for record in received:  # each inspection asks for the item it reads; none is there yet
            records.inspect(self.config, reads, record)
        reads.fetch()
        return [records.inspect(self.config, reads, record) for record in received]

    def forget(self, inspection: Inspection) -> bool:
        """Delete the key's record if it is still what ``inspection`` saw; False (nothing deleted) if it
        changed since."""
        return bool(records.forget(self.config, self.dynamodb, inspection))


class _Reads:
    """The DynamoDB client :func:`records.inspect` gets from :meth:`KeyTable.inspect_all`: before
    :meth:`fetch` its GetItem notes the key asked for and answers "no item"; after, it answers from the items
    fetched (DynamoDB itself for a key not asked before)."""

    def __init__(self, dynamodb: Any, table: str) -> None:
        self.dynamodb, self.table = dynamodb, table
        self.asked: dict[str, dict[str, Any]] = {}
        self.items: dict[str, dict[str, Any]] | None = None

    def get_item(self, *, TableName: str, Key: dict[str, Any], **options: Any) -> dict[str, Any]:
        ref = json.dumps(Key, sort_keys=True)
        if TableName == self.table and self.items is None:
            self.asked.setdefault(ref, Key)
            return {}
        if TableName == self.table and ref in self.asked:
            found = (self.items or {}).get(ref)
            return {"Item": found} if found else {}
        return dict(self.dynamodb.get_item(TableName=TableName, Key=Key, **options))

    def fetch(self) -> None:
        self.items = {}
        keys = list(self.asked.values())
        for start in range(0, len(keys), 100):  # DynamoDB: BatchGetItem reads at most 100 items a request
            request: dict[str, Any] = {
                self.table: {"Keys": keys[start : start + 100], "ConsistentRead": True}
            }
            pause = 0.05
            while request:
                answer = self.dynamodb.batch_get_item(RequestItems=request)
                for item in answer.get("Responses", {}).get(self.table, []):
                    self.items[json.dumps({name: item[name] for name in keys[0]}, sort_keys=True)] = item
                request = answer.get("UnprocessedKeys") or {}
                if request:  # throttled: ask again for the rest, backing off
                    time.sleep(pause)
                    pause = min(pause * 2, 1.0)
