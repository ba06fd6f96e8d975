"""SNS delivery to SQS in the emulator behaves as AWS documents it where moto 5.2.5 does not: a message SNS
cannot deliver goes to the subscription's dead-letter queue (or is dropped without one), never back to the
publisher."""

from __future__ import annotations

import json
from typing import Any

from idempotent_local.emulator import Emulator


def _queue(emulator: Emulator, name: str) -> tuple[str, str]:
    sqs = emulator.client("sqs")
    attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _messages(emulator: Emulator, url: str) -> list[dict[str, Any]]:
    return (
        emulator.client("sqs")
        .receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=600,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        .get("Messages", [])
    )


def _pipeline(
    emulator: Emulator, *, fifo: bool = True, raw: str = "true", dead_letter_queue: bool = True
) -> dict:
    sns = emulator.client("sns")
    suffix = ".fifo" if fifo else ""
    topic = sns.create_topic(
        Name=f"orders{suffix}",
        Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "true"} if fifo else {},
    )["TopicArn"]
    queue, queue_arn = _queue(emulator, f"orders{suffix}")
    attributes = {"RawMessageDelivery": raw}
    dlq = None
    if dead_letter_queue:
        dlq, dlq_arn = _queue(emulator, f"orders-subscription-dlq{suffix}")
        attributes["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": dlq_arn})
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes=attributes)
    return {"topic": topic, "queue": queue, "dlq": dlq}


def _publish(emulator: Emulator, topic: str, body: str, attributes: int = 1, **kwargs: Any) -> str:
    message_attributes = {f"a{n}": {"DataType": "String", "StringValue": str(n)} for n in range(attributes)}
    if topic.endswith(".fifo"):
        kwargs.setdefault("MessageGroupId", "g")
    return emulator.client("sns").publish(
        TopicArn=topic, Message=body, MessageAttributes=message_attributes, **kwargs
    )["MessageId"]


def test_a_message_for_a_deleted_queue_goes_to_the_subscription_dead_letter_queue(
    clean_emulator: Emulator,
) -> None:
    wired = _pipeline(clean_emulator)
    clean_emulator.client("sqs").delete_queue(QueueUrl=wired["queue"])

    assert _publish(clean_emulator, wired["topic"], '{"order": 1}', MessageGroupId="tenant-7")

    (letter,) = _messages(clean_emulator, wired["dlq"])
    assert letter["Body"] == '{"order": 1}'
    assert letter["Attributes"]["MessageGroupId"] == "tenant-7"
    attributes = {k: v["StringValue"] for k, v in letter["MessageAttributes"].items()}
    assert attributes["ErrorCode"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert attributes["ErrorMessage"] == "The specified queue does not exist."
    assert attributes["RequestID"]
    assert attributes["a0"] == "0"  # the original attributes, as far as they fit


def test_more_than_ten_attributes_with_raw_delivery_go_to_the_subscription_dead_letter_queue(
    clean_emulator: Emulator,
) -> None:
    wired = _pipeline(clean_emulator)
    _publish(clean_emulator, wired["topic"], "too many attributes", attributes=11)
    _publish(clean_emulator, wired["topic"], "ten attributes", attributes=10)

    assert [m["Body"] for m in _messages(clean_emulator, wired["queue"])] == ["ten attributes"]
    (letter,) = _messages(clean_emulator, wired["dlq"])
    assert letter["Body"] == "too many attributes"
    assert letter["MessageAttributes"]["ErrorCode"]["StringValue"] == "InvalidParameterValue"
    assert (
        "[11] exceeds the allowed maximum [10]" in letter["MessageAttributes"]["ErrorMessage"]["StringValue"]
    )
    assert len(letter["MessageAttributes"]) == 10


def test_without_a_redrive_policy_an_undeliverable_message_is_dropped_not_refused(
    clean_emulator: Emulator,
) -> None:
    wired = _pipeline(clean_emulator, fifo=False, dead_letter_queue=False)
    clean_emulator.client("sqs").delete_queue(QueueUrl=wired["queue"])

    # SNS accepted the message: the publisher never learns of a failed delivery (the metric
    # NumberOfNotificationsFailed would count it).
    assert _publish(clean_emulator, wired["topic"], "lost")
    assert clean_emulator.client("sqs").list_queues().get("QueueUrls", []) == []


def test_standard_topic_fails_over_to_a_standard_subscription_dead_letter_queue(
    clean_emulator: Emulator,
) -> None:
    wired = _pipeline(clean_emulator, fifo=False)
    _publish(clean_emulator, wired["topic"], "delivered")
    _publish(clean_emulator, wired["topic"], "refused", attributes=12)
    assert [m["Body"] for m in _messages(clean_emulator, wired["queue"])] == ["delivered"]
    assert [m["Body"] for m in _messages(clean_emulator, wired["dlq"])] == ["refused"]


def test_raw_message_delivery_false_delivers_the_json_envelope(clean_emulator: Emulator) -> None:
    wired = _pipeline(clean_emulator, raw="false")
    message_id = _publish(clean_emulator, wired["topic"], '{"order": 2}')
    (message,) = _messages(clean_emulator, wired["queue"])
    envelope = json.loads(message["Body"])
    assert (envelope["Type"], envelope["Message"], envelope["MessageId"]) == (
        "Notification",
        '{"order": 2}',
        message_id,
    )
    assert envelope["MessageAttributes"]["a0"] == {"Type": "String", "Value": "0"}
    assert "MessageAttributes" not in message
