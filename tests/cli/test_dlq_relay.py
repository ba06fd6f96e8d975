"""dlq list on the relay's dead-letter queue: what the emit target refused for good, counted by reason."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from dlq_helpers import client, dlq, make_queue, unique
from idempotent_runtime.outbox import (
    OUTBOX_BODY,
    OUTBOX_DEDUP_ID,
    OUTBOX_GROUP_ATTRIBUTE,
    OUTBOX_MESSAGES_ATTRIBUTE,
)
from idempotent_runtime.relay import Relay, RelayConfig

pytestmark = pytest.mark.usefixtures("cloud")

TARGET = "arn:aws:sns:us-east-1:000000000000:payments.fifo"


class Refusing:
    """An SNS client whose every PublishBatch is refused as invalid: for good."""

    def publish_batch(self, **_):
        raise ClientError({"Error": {"Code": "InvalidParameter", "Message": "bad attribute"}}, "PublishBatch")


def _outbox_record(sequence: str, *messages: tuple[str, str]) -> dict:
    listed = [{"M": {OUTBOX_BODY: {"S": body}, OUTBOX_DEDUP_ID: {"S": dedup}}} for body, dedup in messages]
    image = {OUTBOX_MESSAGES_ATTRIBUTE: {"L": listed}, OUTBOX_GROUP_ATTRIBUTE: {"S": "order-1"}}
    return {"eventName": "INSERT", "dynamodb": {"SequenceNumber": sequence, "NewImage": image}}


def test_dlq_list_reads_the_relays_dead_letters_by_reason():
    url = make_queue(unique("relay-dlq"), fifo=False)
    relay = Relay(
        RelayConfig(target_arn=TARGET, dlq_url=url), target_client=Refusing(), sqs_client=client("sqs")
    )
    records = [
        _outbox_record("1", ('{"pay":1}', "order-1#1#000")),
        _outbox_record("2", ('{"pay":2}', "order-1#2#000")),
    ]
    assert relay({"Records": records}) == {
        "batchItemFailures": []
    }  # refused for good: dead-lettered, not retried

    code, terminal = dlq("list", "--queue-url", url)

    assert code == 0, terminal.error
    lines = terminal.lines
    assert "2 message(s): 2 visible, 0 in flight" in lines
    (reason,) = lines[lines.index("by reason, oldest first:") + 2 :]
    assert reason.split()[:2] == ["unpublishable", "2"]
    assert "the emit target refused it for good: InvalidParameter: bad attribute" in reason

    code, terminal = dlq("show", "--queue-url", url, "order-1#2#000")
    assert code == 0, terminal.error
    assert any('{"pay":2}' in line for line in terminal.lines), terminal.lines

    code, terminal = dlq("purge", "--queue-url", url, "--reason", "unpublishable", "--yes")
    assert code == 0, terminal.error
    assert client("sqs").receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []
