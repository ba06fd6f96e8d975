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


def refuse(sns, refused):
    """SNS refuses the PublishBatch entries for which ``refused(entry)`` is true (each once: a retry is
    accepted); the others are published for real. Returns the requests' entries, one list per request."""
    import boto3
    from botocore.awsrequest import AWSResponse

    real = boto3.client("sns", region_name=sns.meta.region_name)
    requests: list[list[dict]] = []
    seen: set[str] = set()

    def call(**_):
        params = sent[-1]
        entries = params["PublishBatchRequestEntries"]
        requests.append(entries)
        bad = [e for e in entries if refused(e) and e["Message"] not in seen]
        seen.update(e["Message"] for e in bad)
        good = [e for e in entries if e not in bad]
        parsed = (
            real.publish_batch(TopicArn=params["TopicArn"], PublishBatchRequestEntries=good) if good else {}
        )
        parsed.setdefault("Successful", [])
        parsed["Failed"] = [
            {"Id": e["Id"], "Code": "InternalError", "Message": "try later", "SenderFault": False}
            for e in bad
        ]
        return AWSResponse("https://sns.invalid", 200, {}, None), parsed

    sent: list[dict] = []
    sns.meta.events.register(
        "before-parameter-build.sns.PublishBatch", lambda params, **_: sent.append(params)
    )
    sns.meta.events.register("before-call.sns.PublishBatch", call)
    return requests


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


def test_publish_batches_ten_groups_a_request_in_order_with_deterministic_dedup_ids(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    calls = []
    sns.meta.events.register(
        "before-parameter-build.sns.PublishBatch", lambda params, **_: calls.append(params)
    )
    messages = [{"x": f"a{i:02}", "y": "b", "n": i} for i in range(23)]
    result = publish(sns, topic, messages, group_id=lambda m: f"g{m['n'] % 12}")
    assert result.ok and all(result.message_ids)
    # At most one message of a group per request, earliest first: 12 groups, then the groups' second and
    # third messages.
    assert [len(c["PublishBatchRequestEntries"]) for c in calls] == [10, 10, 3]
    received = drain(sqs, queue_url)
    assert sorted(received, key=lambda m: json.loads(m["Body"])["n"]) == received  # sent in input order
    assert [json.loads(m["Body"]) for m in received] == messages
    assert [m["Attributes"]["MessageDeduplicationId"] for m in received] == [f"a{i:02}#b" for i in range(23)]
    assert [m["Attributes"]["MessageGroupId"] for m in received] == [f"g{i % 12}" for i in range(23)]


def test_one_group_is_published_one_message_a_request(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    calls = []
    sns.meta.events.register(
        "before-parameter-build.sns.PublishBatch", lambda params, **_: calls.append(params)
    )
    messages = [{"x": f"a{i}", "y": "b"} for i in range(3)]
    assert publish(sns, topic, messages, group_id="orders").ok
    assert [len(c["PublishBatchRequestEntries"]) for c in calls] == [1, 1, 1]
    assert [json.loads(m["Body"]) for m in drain(sqs, queue_url)] == messages


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


def test_failed_entries_are_reported_with_index_group_dedup_id_and_code(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    refuse(sns, lambda entry: '"b"' in entry["Message"])
    messages = [{"x": "a", "y": "1"}, {"x": "b", "y": "1"}, {"x": "c", "y": "1"}]
    result = publish(sns, topic, messages, group_id=lambda m: m["x"])
    assert not result.ok
    (failure,) = result.failed
    assert (failure.index, failure.group_id, failure.dedup_id, failure.code, failure.sender_fault) == (
        1,
        "b",
        "b#1",
        "InternalError",
        False,
    )
    assert [bool(i) for i in result.message_ids] == [True, False, True]
    assert [json.loads(m["Body"])["x"] for m in drain(sqs, queue_url)] == ["a", "c"]
    with pytest.raises(PublishError, match=r"^1 message\(s\) not published \(1 failed, 0 not attempted\): "):
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


def test_a_failed_message_stops_its_group_and_a_retry_keeps_the_groups_order(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    refuse(sns, lambda entry: '"a2"' in entry["Message"])
    names = ["a1", "b1", "a2", "b2", "a3", "b3", "a4"]
    messages = [{"x": name, "y": "1"} for name in names]
    result = publish(sns, topic, messages, group_id=lambda m: m["x"][0])
    first = drain(sqs, queue_url)
    by_group = {
        g: [json.loads(m["Body"])["x"] for m in first if m["Attributes"]["MessageGroupId"] == g] for g in "ab"
    }
    assert by_group == {"a": ["a1"], "b": ["b1", "b2", "b3"]}  # a3 and a4 wait for a2
    assert [str(s) for s in result.statuses] == [
        "published", "published", "failed", "published", "not_attempted", "published", "not_attempted",
    ]  # fmt: skip
    (failure,) = result.failed
    assert (failure.index, failure.group_id, failure.code) == (2, "a", "InternalError")
    assert result.unpublished == [2, 4, 6]
    retried = publish(sns, topic, [messages[i] for i in result.unpublished], group_id=lambda m: m["x"][0])
    assert retried.ok
    again = drain(sqs, queue_url)
    assert [json.loads(m["Body"])["x"] for m in again] == ["a2", "a3", "a4"]
    assert {m["Attributes"]["MessageGroupId"] for m in again} == {"a"}


def test_a_message_the_consumer_would_reject_stops_the_call_before_anything_is_sent(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    messages = [{"x": f"a{i}", "y": "1"} for i in range(11)] + [{"x": "a11"}]
    with pytest.raises(ValueError, match=r"^message 11: sort key field 'y' is missing from the body"):
        publish(sns, topic, messages, group_id="g")
    assert drain(sqs, queue_url) == []


def test_a_request_that_fails_as_a_whole_fails_its_messages_and_stops_the_call(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    from botocore.exceptions import ClientError

    calls = []

    def denied(**_):
        calls.append(1)
        if len(calls) == 2:
            raise ClientError({"Error": {"Code": "Throttled", "Message": "slow down"}}, "PublishBatch")

    sns.meta.events.register("before-call.sns.PublishBatch", denied)
    messages = [{"x": f"m{i:02}", "y": "1"} for i in range(25)]
    result = publish(sns, topic, messages, group_id=lambda m: m["x"])  # 25 groups: 10 + 10 + 5
    assert len(calls) == 2
    assert [json.loads(m["Body"])["x"] for m in drain(sqs, queue_url)] == [f"m{i:02}" for i in range(10)]
    assert [f.index for f in result.failed] == list(range(10, 20))
    assert {(f.code, f.message) for f in result.failed} == {("Throttled", "slow down")}
    assert result.unpublished == list(range(10, 25))
    assert result.statuses[20:] == ["not_attempted"] * 5
