"""document mode: one conditional PutItem per message; ConditionalCheckFailed means "already stored"."""

from __future__ import annotations

from typing import Any

from idempotent_runtime.attributes import MAX_ITEM_BYTES, check_item_size, to_item
from idempotent_runtime.batch import DUPLICATE, PROCESSED
from idempotent_runtime.errors import InvalidMessage, is_conditional_check_failed
from idempotent_runtime.message import Message
from idempotent_runtime.modes import ABSENT, Mode

# A record past its TTL but not yet deleted by DynamoDB (deletion lags up to ~48 h) counts as absent.
# Bodies up to this many characters cannot make a 400 KB item (a character is at most 4 UTF-8 bytes and an
# item is at most ~1.5x its JSON text), so their size is not computed...
_SIZE_CHECK_FROM = 50_000


def _needs_size_check(body: str) -> bool:
    # ...unless they escape a surrogate (\ud800-\udfff): an unpaired one parses to text with no UTF-8
    # form, which the size check finds and rejects.
    return len(body) > _SIZE_CHECK_FROM or "\\ud" in body or "\\uD" in body


class DocumentMode(Mode):
    """Store the item built from the message with ``attribute_not_exists`` on its key: 1 request, new or not.

    Processor (optional): ``fn(message) -> dict | None`` returning the item's attributes as Python values;
    None (or no processor) stores the fields of the JSON body. The runtime sets the key attributes and
    the TTL.
    """

    name = "document"

    def process(self, message: Message, context: object | None = None) -> tuple[str, Any]:
        attributes = self.processor(message) if self.processor is not None else None
        if attributes is None:
            attributes = message.json_object()
        elif not isinstance(attributes, dict):
            raise InvalidMessage(
                "document processor must return a dict of attributes or None, "
                f"got {type(attributes).__name__}"
            )
        item = to_item(attributes)
        key = message.key
        assert key is not None
        now = int(self.clock())
        item[self.pk] = {"S": key.partition}
        item[self.sk] = {"S": key.sort}
        if self.ttl_seconds:
            item[self.ttl] = {"N": str(now + self.ttl_seconds)}
        else:
            item.pop(self.ttl, None)
        if self.processor is not None or _needs_size_check(message.body):
            check_item_size(item, MAX_ITEM_BYTES)
        try:
            self.dynamodb().put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression=ABSENT,
                ExpressionAttributeNames=self.names,
                ExpressionAttributeValues={":now": {"N": str(now)}},
            )
        except Exception as exc:
            if is_conditional_check_failed(exc):
                return DUPLICATE, None
            raise
        return PROCESSED, None
