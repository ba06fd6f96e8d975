"""Integration test: standard topic and queues (``fifo=False``), document mode.

Standard queues keep no order and SNS deduplicates nothing: every copy of a message reaches the function.
Readings keyed by ``device`` + ``reading``; ``sent_at`` is set per send and stays out of the fingerprint.
"""

from __future__ import annotations

import aws_cdk as cdk
from steps import DeadLetter, Item, Message, Scenario, build_test

from idempotent_pipeline import ConsumerOptions

KITCHEN = '{"device":"d-1","reading":"r-1","celsius":21.5,"sent_at":"10:00"}'
HALL = '{"device":"d-1","reading":"r-2","celsius":19.25,"sent_at":"10:00"}'
CELLAR = '{"device":"d-2","reading":"r-1","celsius":-3,"sent_at":"10:00"}'
CELLAR_AGAIN = '{"device":"d-2","reading":"r-1","celsius":-3,"sent_at":"10:05"}'
HALL_WARMER = '{"device":"d-1","reading":"r-2","celsius":30,"sent_at":"10:05"}'
INVALID = '{"device":"d-3","reading":'
KEYLESS = '{"reading":"r-9","celsius":1}'

SCENARIO = Scenario(
    first=[Message(KITCHEN), Message(HALL), Message(CELLAR)],
    then=[
        Message(KITCHEN),  # the same message again: nothing in SNS or SQS stops it
        Message(CELLAR_AGAIN),  # resent with a new sent_at, which is not fingerprinted: a duplicate too
        Message(HALL_WARMER),  # same key, another temperature: a conflict
        Message(INVALID),
        Message(KEYLESS),
    ],
    items=[
        Item({"pk": "d-1", "sk": "r-1"}, {"celsius": {"N": "21.5"}, "sent_at": {"S": "10:00"}}),
        Item({"pk": "d-1", "sk": "r-2"}, {"celsius": {"N": "19.25"}}),
        Item({"pk": "d-2", "sk": "r-1"}, {"celsius": {"N": "-3"}, "sent_at": {"S": "10:00"}}),
    ],
    dead_letters=[
        DeadLetter(
            HALL_WARMER,
            r"^conflict: key d-1#r-2 is already done with another payload",
            {"kind": "conflict", "key": {"partition": "d-1", "sort": "r-2"}},
        ),
        DeadLetter(INVALID, r"^body is not valid json", {"kind": "invalid"}),
        DeadLetter(KEYLESS, r"partition key field 'device' is missing from the body", {"kind": "invalid"}),
    ],
)


def build(app: cdk.App) -> None:
    consumer = ConsumerOptions(
        partition_key_field="device", sort_key_field="reading", fingerprint_exclude=["sent_at"]
    )
    build_test(app, "Standard", "Readings", SCENARIO, consumer, fifo=False)


if __name__ == "__main__":
    app = cdk.App()
    build(app)
    app.synth()
