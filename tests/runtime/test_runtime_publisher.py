"""The producer helper: PublishBatch in chunks of 10 with deterministic deduplication ids."""

from __future__ import annotations

import json

import pytest
from idempotent_runtime.publisher import PublishError, dedup_id_for, publish
from runtime_helpers import drain


@pytest.fixture
def topic_and_queue(pipeline):
    """conftest's topic -> raw-delivery queue, as the constructs deploy it."""
    sns, topic, queue_url, _queue_arn = pipeline
    return sns, topic, queue_url


def test_dedup_id_joins_the_key_fields():
    assert dedup_id_for({"x": "a", "y": "b", "z": 1}, ("x", "y")) == "a#b"


def test_overlong_dedup_id_becomes_its_sha256():
    assert len(dedup_id_for({"x": "a" * 100, "y": "b" * 100}, ("x", "y"))) == 64


def test_missing_key_field_is_a_clear_error():
    with pytest.raises(ValueError, match=r"^sort key field 'y' is missing from the body \(fields: 'x'\)$"):
        dedup_id_for({"x": "a"}, ("x", "y"))


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ({"x": "", "y": "b"}, "partition key field 'x' is empty"),
        ({"x": "a", "y": None}, "sort key field 'y' is null"),
        ({"x": {"id": 1}, "y": "b"}, "partition key field 'x' is an object"),
        ({"x": "idempotency#a", "y": "b"}, "partition key field 'x' begins with 'idempotency#'"),
    ],
)
def test_keys_the_consumer_would_reject_are_rejected_before_publishing(message, reason):
    with pytest.raises(ValueError, match=reason):
        dedup_id_for(message, ("x", "y"))


def test_dedup_ids_use_the_consumers_dotted_paths_and_canonical_numbers():
    # The same value always gives the same id: 100, 100.0 and a Decimal 1E+2 are all "100".
    from decimal import Decimal

    ids = {
        dedup_id_for({"order": {"id": number}, "line": True}, ("order.id", "line"))
        for number in (100, 100.0, Decimal("1E+2"))
    }
    assert ids == {"100#true"}


def test_publish_batches_of_ten_in_order_with_deterministic_dedup_ids(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    calls = []
    sns.meta.events.register(
        "before-parameter-build.sns.PublishBatch", lambda params, **_: calls.append(params)
    )
    messages = [{"x": f"a{i:02}", "y": "b", "n": i} for i in range(23)]
    result = publish(sns, topic, messages, group_id="orders")
    assert result.ok and all(result.message_ids)
    assert [len(c["PublishBatchRequestEntries"]) for c in calls] == [10, 10, 3]
    received = drain(sqs, queue_url)
    assert [json.loads(m["Body"]) for m in received] == messages
    assert [m["Attributes"]["MessageDeduplicationId"] for m in received] == [f"a{i:02}#b" for i in range(23)]
    assert {m["Attributes"]["MessageGroupId"] for m in received} == {"orders"}


def test_republishing_inside_the_window_is_deduplicated(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    publish(sns, topic, [{"x": "a", "y": "b", "v": 1}], group_id="g")
    publish(sns, topic, [{"x": "a", "y": "b", "v": 2}], group_id="g")  # same keys, new content
    (only,) = drain(sqs, queue_url)
    assert json.loads(only["Body"])["v"] == 1


def test_group_id_may_be_derived_from_the_message(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    publish(sns, topic, [{"x": "a", "y": "1"}, {"x": "b", "y": "1"}], group_id=lambda m: m["x"])
    assert sorted(m["Attributes"]["MessageGroupId"] for m in drain(sqs, queue_url)) == ["a", "b"]


def test_failed_entries_are_reported_with_index_dedup_id_and_code(topic_and_queue):
    sns, topic, _ = topic_and_queue

    from botocore.awsrequest import AWSResponse

    sent = []
    sns.meta.events.register(
        "before-parameter-build.sns.PublishBatch", lambda params, **_: sent.append(params)
    )

    def partial(**_):  # SNS accepts entries 0 and 2 and refuses entry 1
        entries = sent[-1]["PublishBatchRequestEntries"]
        parsed = {
            "Successful": [{"Id": e["Id"], "MessageId": f"m-{e['Id']}"} for e in entries if e["Id"] != "1"],
            "Failed": [{"Id": "1", "Code": "InternalError", "Message": "try later", "SenderFault": False}],
            "ResponseMetadata": {"HTTPStatusCode": 200},
        }
        return AWSResponse("https://sns.invalid", 200, {}, None), parsed

    sns.meta.events.register("before-call.sns.PublishBatch", partial)
    result = publish(
        sns, topic, [{"x": "a", "y": "1"}, {"x": "b", "y": "1"}, {"x": "c", "y": "1"}], group_id="g"
    )
    assert not result.ok
    (failure,) = result.failed
    assert (failure.index, failure.dedup_id, failure.code, failure.sender_fault) == (
        1,
        "b#1",
        "InternalError",
        False,
    )
    assert result.message_ids == ["m-0", None, "m-2"]
    with pytest.raises(PublishError, match="1 message\\(s\\) not published: PublishFailure\\(index=1"):
        result.raise_for_failures()


def test_non_object_message_is_rejected(topic_and_queue):
    sns, topic, _ = topic_and_queue
    with pytest.raises(ValueError, match="message 0 must be a json object"):
        publish(sns, topic, ["text"], group_id="g")


def test_dedup_ids_of_key_fields_holding_the_separator_do_not_collide():
    first = dedup_id_for({"x": "acct#1", "y": "p"}, ("x", "y"))
    second = dedup_id_for({"x": "acct", "y": "1#p"}, ("x", "y"))
    assert first != second
    assert len(first) == len(second) == 64  # SHA-256 hex: joining them with '#' would be ambiguous


def test_messages_whose_joined_keys_would_collide_are_both_delivered(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    messages = [{"x": "acct#1", "y": "p", "cents": 100}, {"x": "acct", "y": "1#p", "cents": 999}]
    result = publish(sns, topic, messages, group_id="g")
    assert result.ok
    assert [json.loads(m["Body"]) for m in drain(sqs, queue_url)] == messages
