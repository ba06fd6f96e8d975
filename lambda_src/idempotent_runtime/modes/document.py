"""document mode: one conditional PutItem per message; ConditionalCheckFailed means "already stored"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from idempotent_runtime.attributes import check_item_size, to_item
from idempotent_runtime.contract import (
    DEDUP_ID_ATTRIBUTE,
    FINGERPRINT_ATTRIBUTE,
    TOKEN_ATTRIBUTE,
    Mode,
    Outcome,
)
from idempotent_runtime.errors import InvalidMessage
from idempotent_runtime.keys import written_for
from idempotent_runtime.message import Key, Message
from idempotent_runtime.modes.base import ABSENT, BaseMode, Done, new_token

# Bodies up to this many characters cannot make a 400 KB item (a character is at most 4 UTF-8 bytes and an
# item is at most ~1.5x its JSON text), so their size is not computed...
_SIZE_CHECK_FROM = 50_000


def _needs_size_check(body: str) -> bool:
    # ...unless they escape a surrogate (\ud800-\udfff): an unpaired one parses to text with no UTF-8
    # form, which the size check finds and rejects.
    return len(body) > _SIZE_CHECK_FROM or "\\ud" in body or "\\uD" in body


class DocumentMode(BaseMode):
    """One PutItem with ``attribute_not_exists`` on the key: 1 request, new, duplicate or conflicting.
    Processor (optional): ``fn(message) -> dict | None``, the attributes to store (None: the body). A
    failed condition returns the old item: our token -> processed (response lost); same fingerprint or
    none -> duplicate; another -> conflict.
    """

    name = Mode.DOCUMENT
    # What the runtime stores in TTL_ATTRIBUTE of a document without a lifetime, as a rejection says it.
    no_expiry = "nothing (no TTL: DOCUMENT_TTL_SECONDS is 0)"

    def location(self, key: Key) -> dict[str, Any]:
        return self.item_key(key)

    def process(self, message: Message, context: object | None = None) -> Done:
        key = message.key
        assert key is not None
        # Before the processor, which may change the parsed body it is handed.
        fingerprint = self.fingerprint(message)
        now = self.clock()
        item, own, token = self.document(
            message, key, fingerprint, self.expiry(self.config.document_ttl_seconds, now)
        )
        values = {":now": {"N": str(int(now))}}
        return self.put(item, own, token, ABSENT, values, lambda old: self.done(key, fingerprint, old))

    def put(
        self,
        item: dict[str, Any],
        own: dict[str, Any],
        token: str,
        condition: str,
        values: dict[str, Any],
        refused: Callable[[dict[str, Any]], Done],
    ) -> Done:
        """One PutItem of ``item`` under ``condition``. A failed condition returns the item as it was: our
        own ``token`` (an answer lost) is processed, another key (``own``) a misconfiguration, anything else
        what ``refused`` makes of it."""
        old = self.conditional(
            self.dynamodb().put_item,
            own,
            Item=item,
            ConditionExpression=condition,
            ExpressionAttributeNames=self.names,
            ExpressionAttributeValues=values,
        )
        return Done(Outcome.PROCESSED) if old is None or self.ours(old, token) else refused(old)

    def document(
        self,
        message: Message,
        key: Key,
        fingerprint: str,
        expires: dict[str, str] | None,
        extra: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any], str]:
        """The item ``message`` stores - what the processor returns (None: the body) + the key, the TTL
        ``expires``, the runtime's ``extra`` attributes, fingerprint, a new write token and the deduplication
        id it is written for - with its key attributes and the token; the processor runs here."""
        attributes = self.processor(message) if self.processor is not None else None
        if attributes is None:
            attributes, source = message.json_object(), "body field"
        elif isinstance(attributes, dict):
            source = "processor attribute"
        else:
            raise InvalidMessage(
                f"{self.name.value} processor must return a dict of attributes or None, "
                f"got {type(attributes).__name__}"
            )
        item = to_item(attributes, source)
        own = self.item_key(key)
        if self.pk in item or self.sk in item or self.ttl in item:
            self._check_table_attributes(item, own, expires, source)
        item.update(own)
        if expires is not None:
            item[self.ttl] = expires
        if extra:
            item.update(extra)
        token = new_token()
        item[FINGERPRINT_ATTRIBUTE] = {"S": fingerprint}
        item[TOKEN_ATTRIBUTE] = {"S": token}
        dedup_id = written_for(message)
        if dedup_id:
            item[DEDUP_ID_ATTRIBUTE] = {"S": dedup_id}
        if self.processor is not None or _needs_size_check(message.body):
            check_item_size(item)
        return item, own, token

    def _check_table_attributes(
        self, item: dict[str, Any], own: dict[str, Any], expires: dict[str, Any] | None, source: str
    ) -> None:
        """A field named like the table's key or TTL attribute must hold what the runtime stores there."""
        for name, role in ((self.pk, "partition key"), (self.sk, "sort key"), (self.ttl, "TTL")):
            stored = own.get(name, expires if name == self.ttl else None)
            if name in item and item[name] != stored:
                raise InvalidMessage(
                    f"{source} {name!r} is the table's {role} attribute: the runtime stores "
                    f"{_shown(stored, self.no_expiry)} there, the message has {_shown(item[name], '')}"
                )


def _shown(value: dict[str, Any] | None, nothing: str) -> str:
    if value is None:
        return nothing
    ((kind, text),) = value.items()
    return f"{kind} {str(text)[:80]!r}"
