"""Integration test: the default pipeline (FIFO topic and queues, document mode) on a real account.

Order lines keyed by ``order_id`` + ``line_id``. ``sent_at`` is set per send, so it stays out of the
fingerprint: a resend with a new ``sent_at`` is a duplicate, and the stored line keeps the first one.
"""

from __future__ import annotations

import aws_cdk as cdk
from steps import DeadLetter, Item, Message, Scenario, build_test

from idempotent_pipeline import ConsumerOptions

# A price of 19 significant digits: stored exactly, not as the nearest float.
TEA = (
    '{"order_id":"o-1","line_id":"1","sku":"tea","quantity":2,"price":1234567890.123456789,"sent_at":"10:00"}'
)
CUPS = '{"order_id":"o-1","line_id":"2","sku":"cup","quantity":1,"sent_at":"10:00"}'
POT = '{"order_id":"o-2","line_id":"1","sku":"pot","quantity":1,"sent_at":"10:00"}'
POT_AGAIN = '{"order_id":"o-2","line_id":"1","sku":"pot","quantity":1,"sent_at":"10:05"}'
MORE_CUPS = '{"order_id":"o-1","line_id":"2","sku":"cup","quantity":5,"sent_at":"10:05"}'
INVALID = '{"order_id":"o-3","line_id":"1","sku":'
KEYLESS = '{"line_id":"1","sku":"tea","quantity":1}'

SCENARIO = Scenario(
    first=[Message(TEA, group="o-1"), Message(CUPS, group="o-1"), Message(POT, group="o-2")],
    then=[
        # the producer resends a line after SNS's 5-minute window: same body, new deduplication id
        Message(TEA, group="o-1", dedup="o-1-1-resent"),
        # a line sent again with a new sent_at, which is not fingerprinted: a duplicate too
        Message(POT_AGAIN, group="o-2"),
        Message(MORE_CUPS, group="o-1"),  # same key, another quantity: a conflict
        Message(INVALID, group="o-3"),
        Message(KEYLESS, group="o-4"),
    ],
    items=[
        Item(
            {"pk": "o-1", "sk": "1"},
            {
                "sku": {"S": "tea"},
                "quantity": {"N": "2"},
                "price": {"N": "1234567890.123456789"},
                "sent_at": {"S": "10:00"},
            },
        ),
        Item({"pk": "o-1", "sk": "2"}, {"sku": {"S": "cup"}, "quantity": {"N": "1"}}),
        Item({"pk": "o-2", "sk": "1"}, {"sku": {"S": "pot"}, "sent_at": {"S": "10:00"}}),
    ],
    dead_letters=[
        DeadLetter(
            MORE_CUPS,
            r"^conflict: key o-1#2 is already done with another payload",
            {"kind": "conflict", "key": {"partition": "o-1", "sort": "2"}},
        ),
        DeadLetter(INVALID, r"^body is not valid json", {"kind": "invalid"}),
        DeadLetter(KEYLESS, r"partition key field 'order_id' is missing from the body", {"kind": "invalid"}),
    ],
)


def build(app: cdk.App) -> None:
    consumer = ConsumerOptions(
        partition_key_field="order_id", sort_key_field="line_id", fingerprint_exclude=["sent_at"]
    )
    build_test(app, "FifoDocument", "Orders", SCENARIO, consumer)


if __name__ == "__main__":
    app = cdk.App()
    build(app)
    app.synth()
