"""SQS in the emulator behaves as AWS documents it where moto 5.2.5 does not (see idempotent_local.patches):
FIFO group order after a failed receive, dead-letter moves that never deduplicate, message move tasks."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from idempotent_cli.main import main as cli_main
from idempotent_local.emulator import Emulator

DEDUPLICATION_SECONDS = 300  # SQS: a FIFO queue's deduplication interval


def _until(condition: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """The first truthy value of ``condition()``, polled; fails naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _queue(emulator: Emulator, name: str, **attributes: str) -> tuple[str, str]:
    sqs = emulator.client("sqs")
    if name.endswith(".fifo"):
        attributes.setdefault("FifoQueue", "true")
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _redriving_to(dlq_arn: str, max_receive_count: int = 1) -> str:
    return json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count})


def _send(emulator: Emulator, url: str, *bodies: str, group: str = "g") -> None:
    for body in bodies:
        emulator.client("sqs").send_message(
            QueueUrl=url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=body
        )


def _receive(emulator: Emulator, url: str, count: int = 10, **kwargs: Any) -> list[dict[str, Any]]:
    return (
        emulator.client("sqs")
        .receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=count,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            **kwargs,
        )
        .get("Messages", [])
    )


def _visible(emulator: Emulator, url: str) -> int:
    attributes = emulator.client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def _all_of(emulator: Emulator, url: str) -> list[dict[str, Any]]:
    """Every message of a queue, received once (with a long visibility timeout) until none is left."""
    found: list[dict[str, Any]] = []
    while batch := _receive(emulator, url, VisibilityTimeout=600):
        found += batch
    return found


def _dead_letter(emulator: Emulator, url: str) -> None:
    """Receive everything of ``url`` once, then receive again: the redrive policy (maxReceiveCount 1) moves
    what was received to the dead-letter queue."""
    _until(lambda: _receive(emulator, url, VisibilityTimeout=0), "a first receive")
    _receive(emulator, url, VisibilityTimeout=0)
    assert _visible(emulator, url) == 0


# --- FIFO order --------------------------------------------------------------------------------------------


def test_fifo_group_starts_again_from_its_first_message_after_the_visibility_timeout(
    clean_emulator: Emulator,
) -> None:
    url, _ = _queue(clean_emulator, "order.fifo")
    _send(clean_emulator, url, "first", "second", "third")
    assert [m["Body"] for m in _receive(clean_emulator, url, VisibilityTimeout=1)] == [
        "first",
        "second",
        "third",
    ]
    _until(lambda: _visible(clean_emulator, url) == 3, "the failed receive to time out")

    assert [m["Body"] for m in _receive(clean_emulator, url, count=1)] == ["first"]


def test_a_message_whose_visibility_timeout_runs_out_during_a_long_poll_is_received_by_it(
    clean_emulator: Emulator,
) -> None:
    url, _ = _queue(clean_emulator, "long-poll.fifo")
    _send(clean_emulator, url, "first", "second")
    assert len(_receive(clean_emulator, url, VisibilityTimeout=1)) == 2
    # One long poll of up to 20 s: the group comes back, in order, as soon as its timeout runs out.
    again = _receive(clean_emulator, url, WaitTimeSeconds=20, VisibilityTimeout=600)
    assert [m["Body"] for m in again] == ["first", "second"]


def test_fifo_group_in_flight_blocks_its_later_messages(clean_emulator: Emulator) -> None:
    url, _ = _queue(clean_emulator, "blocked.fifo")
    _send(clean_emulator, url, "first", "second")
    _send(clean_emulator, url, "other", group="h")
    assert [m["Body"] for m in _receive(clean_emulator, url, count=1, VisibilityTimeout=600)] == ["first"]
    assert [m["Body"] for m in _receive(clean_emulator, url, VisibilityTimeout=600)] == ["other"]


# --- moves into a dead-letter queue -----------------------------------------------------------------------


def test_dead_letters_with_the_same_deduplication_id_all_reach_a_shared_fifo_dlq(
    clean_emulator: Emulator,
) -> None:
    dlq, dlq_arn = _queue(clean_emulator, "shared-dlq.fifo")
    first, _ = _queue(clean_emulator, "first.fifo", RedrivePolicy=_redriving_to(dlq_arn))
    second, _ = _queue(clean_emulator, "second.fifo", RedrivePolicy=_redriving_to(dlq_arn))
    _send(clean_emulator, first, "same body")  # deduplication id "same body" in both queues
    _send(clean_emulator, second, "same body")
    _dead_letter(clean_emulator, first)
    _dead_letter(clean_emulator, second)

    letters = _all_of(clean_emulator, dlq)
    assert [m["Body"] for m in letters] == ["same body", "same body"]
    # A FIFO DLQ replaces the deduplication id of a moved message with its message id.
    assert [m["Attributes"]["MessageDeduplicationId"] for m in letters] == [m["MessageId"] for m in letters]
    assert [m["Attributes"]["MessageGroupId"] for m in letters] == ["g", "g"]


def test_dead_letters_keep_their_order_and_attributes(clean_emulator: Emulator) -> None:
    sqs = clean_emulator.client("sqs")
    dlq, dlq_arn = _queue(clean_emulator, "kept-dlq.fifo")
    url, _ = _queue(clean_emulator, "kept.fifo", RedrivePolicy=_redriving_to(dlq_arn))
    for n in range(3):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=f"m{n}",
            MessageGroupId="g",
            MessageDeduplicationId=f"d{n}",
            MessageAttributes={"n": {"DataType": "Number", "StringValue": str(n)}},
        )
    _dead_letter(clean_emulator, url)
    letters = _all_of(clean_emulator, dlq)
    assert [(m["Body"], m["MessageAttributes"]["n"]["StringValue"]) for m in letters] == [
        ("m0", "0"),
        ("m1", "1"),
        ("m2", "2"),
    ]


# --- message move tasks (DLQ redrive) ------------------------------------------------------------------


def _tasks(emulator: Emulator, source_arn: str) -> list[dict[str, Any]]:
    return emulator.client("sqs").list_message_move_tasks(SourceArn=source_arn, MaxResults=10)["Results"]


def _finished(emulator: Emulator, source_arn: str) -> dict[str, Any]:
    return _until(
        lambda: next((t for t in _tasks(emulator, source_arn)[:1] if t["Status"] != "RUNNING"), None),
        "the move task to finish",
    )


def test_move_task_returns_dead_letters_to_their_source_queue_in_group_order(
    clean_emulator: Emulator,
) -> None:
    sqs = clean_emulator.client("sqs")
    dlq, dlq_arn = _queue(clean_emulator, "redrive-dlq.fifo")
    url, _ = _queue(clean_emulator, "redrive.fifo", RedrivePolicy=_redriving_to(dlq_arn))
    _send(clean_emulator, url, "g1", "g2", "g3")
    _send(clean_emulator, url, "h1", group="h")
    _dead_letter(clean_emulator, url)
    ids = {m["Body"]: m["MessageId"] for m in _receive(clean_emulator, dlq, VisibilityTimeout=0)}
    assert len(ids) == 4

    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    task = _finished(clean_emulator, dlq_arn)

    assert handle
    assert (
        task["Status"],
        task["ApproximateNumberOfMessagesMoved"],
        task["ApproximateNumberOfMessagesToMove"],
    ) == (
        "COMPLETED",
        4,
        4,
    )
    assert "TaskHandle" not in task  # only a running task has one
    back = _receive(clean_emulator, url, VisibilityTimeout=600)
    assert [m["Body"] for m in back] == ["g1", "g2", "g3", "h1"]
    # Moved, not copied (the DLQ is empty below), and new messages to SQS: each has a new message id.
    new_ids = [m["MessageId"] for m in back]
    assert len(set(new_ids)) == 4 and not set(new_ids) & set(ids.values())
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in back} == {"1"}  # counted from the move
    assert _all_of(clean_emulator, dlq) == []


def test_move_task_to_a_destination_moves_letters_a_function_sent_there(clean_emulator: Emulator) -> None:
    sqs = clean_emulator.client("sqs")
    dlq, dlq_arn = _queue(clean_emulator, "sent-dlq.fifo")
    url, url_arn = _queue(clean_emulator, "sent.fifo", RedrivePolicy=_redriving_to(dlq_arn, 5))
    _send(clean_emulator, dlq, "quarantined by a function")

    sqs.start_message_move_task(SourceArn=dlq_arn)
    failed = _finished(clean_emulator, dlq_arn)
    assert failed["Status"] == "FAILED"
    assert "has no source queue to return to" in failed["FailureReason"]
    assert _visible(clean_emulator, dlq) == 1  # left where it was

    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=url_arn)
    done = _finished(clean_emulator, dlq_arn)
    assert (done["Status"], done["DestinationArn"], done["ApproximateNumberOfMessagesMoved"]) == (
        "COMPLETED",
        url_arn,
        1,
    )
    assert [m["Body"] for m in _receive(clean_emulator, url)] == ["quarantined by a function"]
    assert [t["Status"] for t in _tasks(clean_emulator, dlq_arn)] == ["COMPLETED", "FAILED"]  # newest first


def test_cancelled_move_task_leaves_the_rest_in_the_dead_letter_queue(clean_emulator: Emulator) -> None:
    sqs = clean_emulator.client("sqs")
    dlq, dlq_arn = _queue(clean_emulator, "slow-dlq.fifo")
    url, _ = _queue(clean_emulator, "slow.fifo", RedrivePolicy=_redriving_to(dlq_arn))
    _send(clean_emulator, url, *[f"m{n}" for n in range(6)])
    _dead_letter(clean_emulator, url)

    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    with pytest.raises(ClientError) as second:
        sqs.start_message_move_task(SourceArn=dlq_arn)
    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]

    (task,) = _tasks(clean_emulator, dlq_arn)
    assert "Only one active task" in second.value.response["Error"]["Message"]
    assert (
        task["Status"],
        task["ApproximateNumberOfMessagesMoved"],
        task["MaxNumberOfMessagesPerSecond"],
    ) == (
        "CANCELLED",
        moved,
        1,
    )
    assert moved < 6
    assert len(_all_of(clean_emulator, url)) == moved
    assert len(_all_of(clean_emulator, dlq)) == 6 - moved
    with pytest.raises(ClientError) as again:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert again.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_move_task_needs_a_dead_letter_queue_that_exists(clean_emulator: Emulator) -> None:
    sqs = clean_emulator.client("sqs")
    _, plain_arn = _queue(clean_emulator, "plain.fifo")
    with pytest.raises(ClientError) as missing:
        sqs.start_message_move_task(SourceArn=plain_arn.replace("plain", "missing"))
    with pytest.raises(ClientError) as not_a_dlq:
        sqs.start_message_move_task(SourceArn=plain_arn)
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert "must be configured as a Dead Letter Queue" in not_a_dlq.value.response["Error"]["Message"]


def test_a_duplicate_send_is_answered_with_the_earlier_message_id_and_not_enqueued(
    clean_emulator: Emulator,
) -> None:
    url, _ = _queue(clean_emulator, "dedup.fifo")
    sqs = clean_emulator.client("sqs")
    first = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g", MessageDeduplicationId="D")
    again = sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="g", MessageDeduplicationId="D")
    assert again["MessageId"] == first["MessageId"]
    assert [m["Body"] for m in _receive(clean_emulator, url)] == ["a"]


def test_a_deduplication_id_is_remembered_after_its_message_was_deleted(clean_emulator: Emulator) -> None:
    url, _ = _queue(clean_emulator, "remembered.fifo", ContentBasedDeduplication="true")
    sqs = clean_emulator.client("sqs")
    first = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g", MessageDeduplicationId="D")
    by_content = sqs.send_message(QueueUrl=url, MessageBody="same content", MessageGroupId="g")
    for message in _receive(clean_emulator, url):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # Within 5 minutes of the first send, consumed or not, SQS drops the same id and the same content.
    again = sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="g", MessageDeduplicationId="D")
    resent = sqs.send_message(QueueUrl=url, MessageBody="same content", MessageGroupId="h")
    assert (again["MessageId"], resent["MessageId"]) == (first["MessageId"], by_content["MessageId"])
    assert _receive(clean_emulator, url, WaitTimeSeconds=1) == []
    other = sqs.send_message(QueueUrl=url, MessageBody="c", MessageGroupId="g", MessageDeduplicationId="E")
    assert [m["MessageId"] for m in _receive(clean_emulator, url)] == [other["MessageId"]]


def test_a_duplicate_publish_to_a_fifo_topic_is_dropped_after_the_first_was_consumed(
    clean_emulator: Emulator,
) -> None:
    url, arn = _queue(clean_emulator, "from-topic.fifo")
    sns = clean_emulator.client("sns")
    topic = sns.create_topic(Name="t.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
    sns.publish(TopicArn=topic, Message="pay", MessageGroupId="g", MessageDeduplicationId="p-1")
    sqs = clean_emulator.client("sqs")
    for message in _receive(clean_emulator, url):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    sns.publish(TopicArn=topic, Message="pay", MessageGroupId="g", MessageDeduplicationId="p-1")
    assert _receive(clean_emulator, url, WaitTimeSeconds=1) == []


def test_a_deduplication_id_is_forgotten_five_minutes_after_its_first_send(clean_emulator: Emulator) -> None:
    url, _ = _queue(clean_emulator, "window.fifo")
    sqs = clean_emulator.client("sqs")

    def send() -> str:
        return sqs.send_message(
            QueueUrl=url, MessageBody="a", MessageGroupId="g", MessageDeduplicationId="D"
        )["MessageId"]

    def consume() -> list[str]:
        received = _receive(clean_emulator, url)
        for message in received:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return [message["MessageId"] for message in received]

    first = send()
    assert consume() == [first]
    clean_emulator.control.clock(DEDUPLICATION_SECONDS - 1)  # the emulator's clock: 4 min 59 s later
    assert send() == first and consume() == []  # still inside the window: dropped
    clean_emulator.control.clock(1)
    later = send()  # the window counts from the first send, not from the dropped one
    assert later != first and consume() == [later]


def test_local_age_lets_a_fifo_topic_deliver_a_deduplication_id_again_after_five_minutes(
    clean_emulator: Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    url, arn = _queue(clean_emulator, "orders.fifo")
    sns = clean_emulator.client("sns")
    topic = sns.create_topic(Name="orders.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})

    def delivered(body: str) -> list[str]:
        sns.publish(TopicArn=topic, Message=body, MessageGroupId="o-1", MessageDeduplicationId="o-1#1")
        received = _receive(clean_emulator, url, WaitTimeSeconds=1)
        for message in received:
            clean_emulator.client("sqs").delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return [message["Body"] for message in received]

    assert delivered("first") == ["first"]
    assert delivered("redriven") == []  # the same deduplication id within 5 minutes: dropped
    assert cli_main(["local", "age-dedup", "4m", "--state-dir", clean_emulator.state_dir]) == 0
    assert delivered("redriven") == []  # 4 minutes later: still within the window
    assert cli_main(["local", "age", "61s", "--state-dir", clean_emulator.state_dir]) == 0
    assert delivered("redriven") == ["redriven"]  # past 5 minutes: SQS has forgotten the id
    printed = capsys.readouterr().out
    assert (
        "the emulator's clock is 5.01667 min ahead: what was written before now is 1.01667 min older:"
        in printed
    )
    assert (
        "    FIFO deduplication ids (an SQS FIFO queue, and so an SNS FIFO topic delivering to it" in printed
    )
    assert "    DynamoDB stream records (a record leaves its stream 24 h after it was written" in printed


def test_with_message_group_scope_a_deduplication_id_is_remembered_per_group(
    clean_emulator: Emulator,
) -> None:
    url, _ = _queue(
        clean_emulator,
        "per-group.fifo",
        DeduplicationScope="messageGroup",
        FifoThroughputLimit="perMessageGroupId",
    )
    sqs = clean_emulator.client("sqs")

    def send(group: str) -> str:
        return sqs.send_message(
            QueueUrl=url, MessageBody=group, MessageGroupId=group, MessageDeduplicationId="d"
        )["MessageId"]

    first, other_group, again = send("g1"), send("g2"), send("g1")
    assert other_group != first and again == first  # the same id: another group's message, a g1 duplicate
    assert sorted(m["Body"] for m in _receive(clean_emulator, url)) == ["g1", "g2"]


# --- a deep queue (the sqs-depth-independent patch keeps its own index of every queue) ----------------------


def test_every_group_of_a_deep_fifo_queue_is_consumed_in_order_also_through_failed_batches(
    clean_emulator: Emulator,
) -> None:
    sqs = clean_emulator.client("sqs")
    url, _ = _queue(clean_emulator, "deep.fifo")
    groups, per_group = 25, 20
    bodies = [f"g{n % groups}:{n // groups}" for n in range(groups * per_group)]
    for start in range(0, len(bodies), 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "MessageBody": body, "MessageGroupId": body.split(":")[0]}
                | {"MessageDeduplicationId": body}
                for i, body in enumerate(bodies[start : start + 10])
            ],
        )
    consumed: dict[str, list[int]] = {}
    for batch_number in range(1000):
        batch = _receive(clean_emulator, url, VisibilityTimeout=600)
        if not batch:
            break
        handles = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)]
        if batch_number % 5 == 4:  # a failed batch: every message of it comes back, first in its group
            sqs.change_message_visibility_batch(
                QueueUrl=url, Entries=[{**h, "VisibilityTimeout": 0} for h in handles]
            )
            continue
        sqs.delete_message_batch(QueueUrl=url, Entries=handles)
        for message in batch:
            group, sequence = message["Body"].split(":")
            consumed.setdefault(group, []).append(int(sequence))

    assert consumed == {f"g{g}": list(range(per_group)) for g in range(groups)}
    assert _visible(clean_emulator, url) == 0


def _counts(emulator: Emulator, url: str) -> tuple[int, int, int]:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    names.append("ApproximateNumberOfMessagesDelayed")
    found = emulator.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return tuple(int(found[name]) for name in names)  # type: ignore[return-value]


def test_queue_counts_follow_sends_receives_visibility_changes_deletes_and_purges(
    clean_emulator: Emulator,
) -> None:
    sqs = clean_emulator.client("sqs")
    url, _ = _queue(clean_emulator, "counted")
    for n in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=f"now {n}")
    for n in range(2):
        sqs.send_message(QueueUrl=url, MessageBody=f"later {n}", DelaySeconds=600)
    assert _counts(clean_emulator, url) == (5, 0, 2)  # visible, in flight, delayed

    first, second, third = _receive(clean_emulator, url, count=3, VisibilityTimeout=600)
    assert _counts(clean_emulator, url) == (2, 3, 2)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
    assert _counts(clean_emulator, url) == (3, 1, 2)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])  # again: accepted, no change
    assert _counts(clean_emulator, url) == (3, 1, 2)

    sqs.purge_queue(QueueUrl=url)
    assert _counts(clean_emulator, url) == (0, 0, 0)
    with pytest.raises(ClientError) as purged:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=third["ReceiptHandle"])
    assert purged.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"


def test_a_message_past_the_retention_period_is_dropped_and_the_receive_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import boto3
    from moto import mock_aws
    from moto.sqs import models

    from idempotent_local import patches, queue_index

    now = [1_000_000.0]
    for module in (models, queue_index):
        monkeypatch.setattr(module, "unix_time", lambda dt=None: now[0])
        monkeypatch.setattr(module, "unix_time_millis", lambda dt=None: now[0] * 1000)
    with mock_aws():
        patches.apply()
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="a-minute", Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="old")
        now[0] += 30
        sqs.send_message(QueueUrl=url, MessageBody="new")
        now[0] += 31  # "old" is 61 s old: SQS has deleted it

        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]

    assert [m["Body"] for m in received] == ["new"]
    in_flight = counts["ApproximateNumberOfMessagesNotVisible"]
    assert (counts["ApproximateNumberOfMessages"], in_flight) == ("0", "1")  # "new"; "old" is gone
