"""SNS FIFO topic -> SQS FIFO queue (raw delivery) -> Lambda's SQS event -> handler -> table, all in moto."""

from __future__ import annotations

import json
from collections import Counter

from idempotent_runtime.publisher import ConsumerKeys, publish
from runtime_helpers import (
    REGION,
    deliver_until_empty,
    dlq_reason,
    drain,
    failures,
    receive_event,
    record_logs,
    scan,
)

from idempotent_local.events import lambda_sqs_event


def test_event_has_the_shape_lambda_gives_the_handler(pipeline, sqs):
    sns, topic, queue_url, queue_arn = pipeline
    sns.publish(
        TopicArn=topic,
        Message='{"x": "a", "y": "b"}',
        MessageGroupId="orders",
        MessageDeduplicationId="a#b",
        MessageAttributes={"tenant": {"DataType": "String", "StringValue": "acme"}},
    )
    lambda_event, messages = receive_event(sqs, queue_url, queue_arn)
    (rec,) = lambda_event["Records"]
    assert set(rec) >= {
        "messageId", "receiptHandle", "body", "attributes", "messageAttributes", "md5OfBody",
        "eventSource", "eventSourceARN", "awsRegion",
    }  # fmt: skip
    assert rec["messageId"] == messages[0]["MessageId"]
    assert rec["body"] == '{"x": "a", "y": "b"}'
    assert rec["eventSource"] == "aws:sqs"
    assert rec["eventSourceARN"] == queue_arn
    assert rec["awsRegion"] == REGION
    attributes = rec["attributes"]
    assert attributes["MessageGroupId"] == "orders"
    assert attributes["MessageDeduplicationId"] == "a#b"
    assert attributes["ApproximateReceiveCount"] == "1"
    assert {"SequenceNumber", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} <= set(
        attributes
    )
    assert rec["messageAttributes"]["tenant"] == {
        "stringValue": "acme",
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": "String",
    }


def test_binary_message_attributes_are_base64_in_the_event():
    message = {
        "MessageId": "m",
        "ReceiptHandle": "r",
        "Body": "{}",
        "MD5OfBody": "0",
        "Attributes": {},
        "MessageAttributes": {"raw": {"DataType": "Binary", "BinaryValue": b"\x00\xff"}},
    }
    (rec,) = lambda_sqs_event([message], "arn:aws:sqs:eu-west-1:123456789012:q.fifo")["Records"]
    assert rec["messageAttributes"]["raw"]["binaryValue"] == "AP8="
    assert rec["awsRegion"] == "eu-west-1"


def test_published_messages_end_as_one_document_each(pipeline, sqs, dynamodb, make_handler, dlq_url):
    sns, topic, queue_url, queue_arn = pipeline
    handler, stream = make_handler(dlq_url=dlq_url)
    orders = [{"x": f"order-{i}", "y": f"line-{i % 3}", "qty": i} for i in range(25)]
    assert publish(
        sns, topic, orders, keys=ConsumerKeys(("x", "y")), group_id=lambda m: f"g{m['qty'] % 4}"
    ).ok
    publish(
        sns, topic, orders[:5], keys=ConsumerKeys(("x", "y")), group_id="g0"
    )  # resent inside the window: SNS drops them
    # Resent after the window (a new deduplication id): delivered; the same content is a duplicate for the
    # table, changed content a conflict (to the DLQ, the first document stays).
    for order, changed in [(o, False) for o in orders[5:8]] + [(o, True) for o in orders[8:10]]:
        sns.publish(
            TopicArn=topic,
            Message=json.dumps({**order, "qty": -1} if changed else order),
            MessageGroupId="late",
            MessageDeduplicationId=f"{order['x']}#{order['y']}#late",
        )
    deliver_until_empty(sqs, queue_url, queue_arn, handler)
    items = {(i["pk"]["S"], i["sk"]["S"]): i for i in scan(dynamodb)}
    assert set(items) == {(o["x"], o["y"]) for o in orders}
    assert all(int(items[(o["x"], o["y"])]["qty"]["N"]) == o["qty"] for o in orders)
    outcomes = Counter((line["outcome"], line.get("conflict", False)) for line in record_logs(stream))
    assert outcomes == {("processed", False): 25, ("duplicate", False): 3, ("quarantined", True): 2}
    assert sorted(json.loads(m["Body"])["x"] for m in drain(sqs, dlq_url)) == ["order-8", "order-9"]


def test_poison_message_from_the_topic_lands_in_the_dlq_and_the_group_goes_on(
    pipeline, sqs, dynamodb, dlq_url, make_handler
):
    sns, topic, queue_url, queue_arn = pipeline
    handler, _ = make_handler(dlq_url=dlq_url)
    sns.publish(TopicArn=topic, Message="not json", MessageGroupId="g", MessageDeduplicationId="bad")
    sns.publish(
        TopicArn=topic, Message='{"x": "a", "y": "b"}', MessageGroupId="g", MessageDeduplicationId="a#b"
    )
    lambda_event, messages = receive_event(sqs, queue_url, queue_arn)
    assert len(messages) == 2
    assert failures(handler(lambda_event, None)) == []
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == "not json"
    assert dead["Attributes"]["MessageGroupId"] == "g"
    assert "body is not valid json" in dlq_reason(dead)
    assert [i["pk"]["S"] for i in scan(dynamodb)] == ["a"]
