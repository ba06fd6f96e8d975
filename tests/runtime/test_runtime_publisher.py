"""The producer helper: deduplication ids from the consumer's keys and fingerprints, and each message group
in order when SNS refuses a message."""

from __future__ import annotations

import json

import pytest
from idempotent_runtime.message import Key
from idempotent_runtime.payload import Fingerprinter, raw_fingerprint
from idempotent_runtime.publisher import ConsumerKeys, PublishError, dedup_id_for, publish
from runtime_helpers import deliver_until_empty, drain, record_logs, scan

KEYS = ConsumerKeys(("x", "y"))  # the consumer's PARTITION_KEY_FIELD and SORT_KEY_FIELD in these tests


def fingerprint(body: dict) -> str:
    return Fingerprinter()(body)


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


def test_dedup_id_is_the_key_and_the_consumers_fingerprint_of_the_content():
    message = {"x": "a", "y": "b", "z": 1}
    assert dedup_id_for(message, KEYS) == f"a#b#{fingerprint(message)}"
    # It begins with the consumer's idempotency key (without KEY_PREFIX): an operator can match them.
    assert dedup_id_for(message, KEYS).startswith(Key("a", "b").idempotency_key + "#")


@pytest.mark.parametrize(("x", "y"), [("a" * 100, "b" * 100), ("é", "b"), ("a b", "c")])
def test_a_dedup_id_sns_would_refuse_becomes_its_sha256(x, y):
    dedup = dedup_id_for({"x": x, "y": y}, KEYS)
    assert len(dedup) == 64 and int(dedup, 16) >= 0  # over 128 characters, or not printable ASCII


def test_missing_key_field_is_a_clear_error():
    with pytest.raises(ValueError, match=r"^sort key field 'y' is missing from the body \(fields: 'x'\)$"):
        dedup_id_for({"x": "a"}, KEYS)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ({"x": "", "y": "b"}, "partition key field 'x' is empty"),
        ({"x": "a", "y": None}, "sort key field 'y' is null"),
        ({"x": {"id": 1}, "y": "b"}, "partition key field 'x' is an object"),
        ({"x": "idempotency#a", "y": "b"}, "partition key field 'x' begins with 'idempotency#'"),
        (
            {"x": "a" * 2049, "y": "b"},
            "partition key field 'x' is 2049 bytes, over dynamodb's 2048-byte limit",
        ),
        ('{"x": "a", "y": "b", "x": "c"}', "body field x appears more than once in its object"),
        ('{"x": "a", "y": NaN}', "y is NaN, which is not a JSON number"),
        ("[1, 2]", "body must be a json object, got list"),
    ],
)
def test_messages_the_consumer_would_reject_are_rejected_before_publishing(message, reason):
    with pytest.raises(ValueError, match=reason):
        dedup_id_for(message, KEYS)


def test_dedup_ids_use_the_consumers_dotted_paths_and_canonical_numbers():
    # The same value always gives the same id: 100, 100.0 and 1E+2 are all "100", for the key and for the
    # fingerprint.
    keys = ConsumerKeys(("order.id", "line"))
    ids = {
        dedup_id_for(f'{{"order": {{"id": {number}}}, "line": true}}', keys)
        for number in ("100", "100.0", "1E+2")
    }
    assert len(ids) == 1 and ids.pop().startswith("100#true#")


def test_the_consumers_fingerprint_settings_decide_what_is_new_content():
    first, resent = {"x": "a", "y": "b", "sent_at": "10:00"}, {"x": "a", "y": "b", "sent_at": "10:05"}
    assert dedup_id_for(first, KEYS) != dedup_id_for(resent, KEYS)
    excluding = ConsumerKeys(("x", "y"), fingerprint_exclude=["sent_at"])
    assert dedup_id_for(first, excluding) == dedup_id_for(resent, excluding)  # the consumer: a duplicate
    only = ConsumerKeys(("x", "y"), fingerprint_fields=["amount"])
    assert dedup_id_for({**first, "amount": 1}, only) != dedup_id_for({**first, "amount": 2}, only)


def test_a_key_prefix_is_checked_as_the_consumer_checks_it_and_leaves_the_id_alone():
    prefixed = ConsumerKeys(("x", "y"), key_prefix="orders#")
    assert dedup_id_for({"x": "a", "y": "b"}, prefixed) == dedup_id_for({"x": "a", "y": "b"}, KEYS)
    with pytest.raises(ValueError, match="partition key field 'x' is 2049 bytes, over dynamodb's 2048"):
        dedup_id_for({"x": "a" * 2042, "y": "b"}, prefixed)


def test_dedup_id_source_makes_the_id_from_the_business_key_alone():
    keys = ConsumerKeys(["order_id", "line"], key_source="dedup_id")
    assert dedup_id_for({"order_id": "o-1", "line": 2, "qty": 1}, keys) == "o-1#2"
    # New content under the same key: the same id, which is the consumer's key (a new id would be a new key).
    assert dedup_id_for({"order_id": "o-1", "line": 2, "qty": 5}, keys) == "o-1#2"
    assert (
        dedup_id_for({"order_id": "o-1", "qty": 5}, ConsumerKeys(["order_id"], key_source="dedup_id"))
        == "o-1"
    )


@pytest.mark.parametrize("source", ["message_id", "body_sha256"])
def test_message_id_and_body_sha256_sources_use_the_sha256_of_the_body(source):
    text = '{"x": "a", "y": "b"}'
    assert dedup_id_for(text, ConsumerKeys(key_source=source)) == raw_fingerprint(text)


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({}, r"key_source fields needs key_fields=\(partition_key_field, sort_key_field\)"),
        ({"key_fields": ["x"]}, r"key_source fields needs key_fields=.* got \('x',\)"),
        ({"key_source": "dedup_id"}, "key_source dedup_id needs key_fields"),
        ({"key_source": "message_id", "key_fields": ["x"]}, "key_source message_id reads no body fields"),
        (
            {"key_source": "body", "key_fields": ["x"]},
            "key_source must be one of fields, dedup_id, message_id",
        ),
        ({"key_fields": ["x", "a..b"]}, "SORT_KEY_FIELD: field path 'a..b' has an empty segment"),
        (
            {"key_fields": ["x", "y"], "fingerprint_fields": ["a"], "fingerprint_exclude": ["b"]},
            "FINGERPRINT_FIELDS and FINGERPRINT_EXCLUDE cannot both be set",
        ),
        ({"key_fields": ["x", "y"], "fingerprint_exclude": "sent_at"}, "must be a list of field paths"),
    ],
)
def test_settings_the_consumer_would_not_run_with_are_refused(settings, error):
    with pytest.raises(ValueError, match=error):
        ConsumerKeys(**settings)


def test_consumer_keys_come_from_the_deployed_functions_environment():
    environment = {
        "TABLE_NAME": "orders",
        "PARTITION_KEY_FIELD": "order_id",
        "SORT_KEY_FIELD": "line_id",
        "FINGERPRINT_EXCLUDE": '["sent_at"]',
        "KEY_PREFIX": "shop#",
    }
    keys = ConsumerKeys.from_environment(environment)
    assert keys == ConsumerKeys(("order_id", "line_id"), fingerprint_exclude=("sent_at",), key_prefix="shop#")
    dedup = {**environment, "KEY_SOURCE": "dedup_id"}
    with pytest.raises(ValueError, match="key_source dedup_id needs key_fields"):
        ConsumerKeys.from_environment(dedup)
    assert ConsumerKeys.from_environment(dedup, key_fields=["order_id"]).key_fields == ("order_id",)
    with pytest.raises(
        ValueError, match="key_fields are the consumer's PARTITION_KEY_FIELD and SORT_KEY_FIELD"
    ):
        ConsumerKeys.from_environment(environment, key_fields=["order_id"])


def test_publish_batches_ten_groups_a_request_in_order_with_deterministic_dedup_ids(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    calls = []
    sns.meta.events.register(
        "before-parameter-build.sns.PublishBatch", lambda params, **_: calls.append(params)
    )
    messages = [{"x": f"a{i:02}", "y": "b", "n": i} for i in range(23)]
    result = publish(sns, topic, messages, keys=KEYS, group_id=lambda m: f"g{m['n'] % 12}")
    assert result.ok and all(result.message_ids)
    # At most one message of a group per request, earliest first: 12 groups, then the groups' second and
    # third messages.
    assert [len(c["PublishBatchRequestEntries"]) for c in calls] == [10, 10, 3]
    received = drain(sqs, queue_url)
    assert [json.loads(m["Body"]) for m in received] == messages  # in input order
    assert [m["Attributes"]["MessageDeduplicationId"] for m in received] == [
        f"a{i:02}#b#{fingerprint(m)}" for i, m in enumerate(messages)
    ]
    assert [m["Attributes"]["MessageGroupId"] for m in received] == [f"g{i % 12}" for i in range(23)]


def test_one_group_is_published_one_message_a_request(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    calls = []
    sns.meta.events.register(
        "before-parameter-build.sns.PublishBatch", lambda params, **_: calls.append(params)
    )
    messages = [{"x": f"a{i}", "y": "b"} for i in range(3)]
    assert publish(sns, topic, messages, keys=KEYS, group_id="orders").ok
    assert [len(c["PublishBatchRequestEntries"]) for c in calls] == [1, 1, 1]
    assert [json.loads(m["Body"]) for m in drain(sqs, queue_url)] == messages


def test_an_exact_resend_inside_the_window_is_dropped_by_sns(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    publish(sns, topic, [{"x": "a", "y": "b", "v": 1}], keys=KEYS, group_id="g")
    publish(sns, topic, ['{"y":"b","v":1.0,"x":"a"}'], keys=KEYS, group_id="g")  # the same, written otherwise
    (only,) = drain(sqs, queue_url)
    assert json.loads(only["Body"]) == {"x": "a", "y": "b", "v": 1}


def test_new_content_under_a_used_key_reaches_the_consumer_as_a_conflict(
    pipeline, sqs, dynamodb, make_handler, dlq_url
):
    sns, topic, queue_url, queue_arn = pipeline
    handler, stream = make_handler(dlq_url=dlq_url)
    publish(sns, topic, [{"x": "a", "y": "b", "v": 1}], keys=KEYS, group_id="g")
    publish(sns, topic, [{"x": "a", "y": "b", "v": 2}], keys=KEYS, group_id="g")  # inside SNS's window
    deliver_until_empty(sqs, queue_url, queue_arn, handler)
    outcomes = [(line["outcome"], line.get("conflict", False)) for line in record_logs(stream)]
    assert outcomes == [("processed", False), ("quarantined", True)]
    (item,) = scan(dynamodb)
    assert item["v"] == {"N": "1"}
    (dead,) = drain(sqs, dlq_url)
    assert json.loads(dead["Body"])["v"] == 2


def test_with_dedup_id_keys_new_content_is_the_same_key_and_never_a_second_effect(
    pipeline, sqs, dynamodb, make_handler, dlq_url
):
    sns, topic, queue_url, queue_arn = pipeline
    handler, stream = make_handler(dlq_url=dlq_url, key_source="dedup_id")
    keys = ConsumerKeys(["order_id"], key_source="dedup_id")
    publish(sns, topic, [{"order_id": "o-1", "v": 1}], keys=keys, group_id="g")
    deliver_until_empty(sqs, queue_url, queue_arn, handler)
    # After SNS's window (this moto forgets a deleted message's id at once): the same id, so the same key.
    publish(sns, topic, [{"order_id": "o-1", "v": 2}], keys=keys, group_id="g")
    deliver_until_empty(sqs, queue_url, queue_arn, handler)
    outcomes = [(line["outcome"], line.get("conflict", False)) for line in record_logs(stream)]
    assert outcomes == [("processed", False), ("quarantined", True)]
    (item,) = scan(dynamodb)
    assert (item["pk"], item["v"]) == ({"S": "o-1"}, {"N": "1"})


def test_with_body_sha256_keys_the_dedup_id_is_the_consumers_key(pipeline, sqs, dynamodb, make_handler):
    sns, topic, queue_url, queue_arn = pipeline
    handler, _ = make_handler(key_source="body_sha256")
    result = publish(
        sns, topic, ['{"order_id": "o-1"}'], keys=ConsumerKeys(key_source="body_sha256"), group_id="g"
    )
    deliver_until_empty(sqs, queue_url, queue_arn, handler)
    (item,) = scan(dynamodb)
    assert item["pk"] == {"S": raw_fingerprint('{"order_id": "o-1"}')} and result.ok


def test_json_texts_are_sent_exactly_as_written(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    text = '{"x": "a", "y": "b", "amount": 1234567890.123456789, "note": "caf\\u00e9"}'
    assert publish(sns, topic, [text], keys=KEYS, group_id="g").ok
    (received,) = drain(sqs, queue_url)
    assert received["Body"] == text


def test_group_id_may_be_derived_from_the_message(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    messages = [{"x": "a", "y": "1"}, {"x": "b", "y": "1"}]
    publish(sns, topic, messages, keys=KEYS, group_id=lambda m: m["x"])
    assert sorted(m["Attributes"]["MessageGroupId"] for m in drain(sqs, queue_url)) == ["a", "b"]


@pytest.mark.parametrize("group", ["", "é", "g" * 129, 7])
def test_a_group_id_sns_would_refuse_is_refused_before_publishing(topic_and_queue, sqs, group):
    sns, topic, queue_url = topic_and_queue
    with pytest.raises(ValueError, match=r"^message 1: its group id must be 1-128 printable ASCII"):
        publish(
            sns,
            topic,
            [{"x": "a", "y": "1"}, {"x": "b", "y": "1"}],
            keys=KEYS,
            group_id=lambda m: "ok" if m["x"] == "a" else group,
        )
    assert drain(sqs, queue_url) == []


def test_failed_entries_are_reported_with_index_group_dedup_id_and_code(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    refuse(sns, lambda entry: '"b"' in entry["Message"])
    messages = [{"x": "a", "y": "1"}, {"x": "b", "y": "1"}, {"x": "c", "y": "1"}]
    result = publish(sns, topic, messages, keys=KEYS, group_id=lambda m: m["x"])
    assert not result.ok
    (failure,) = result.failed
    assert (failure.index, failure.group_id, failure.dedup_id, failure.code, failure.sender_fault) == (
        1,
        "b",
        dedup_id_for(messages[1], KEYS),
        "InternalError",
        False,
    )
    assert [bool(i) for i in result.message_ids] == [True, False, True]
    assert [json.loads(m["Body"])["x"] for m in drain(sqs, queue_url)] == ["a", "c"]
    with pytest.raises(PublishError, match=r"^1 message\(s\) not published \(1 failed, 0 not attempted\): "):
        result.raise_for_failures()


def test_non_object_message_is_rejected(topic_and_queue):
    sns, topic, _ = topic_and_queue
    with pytest.raises(ValueError, match=r"^message 0: must be a json object"):
        publish(sns, topic, [7], keys=KEYS, group_id="g")


def test_dedup_ids_of_key_fields_holding_the_separator_do_not_collide():
    first = dedup_id_for({"x": "acct#1", "y": "p"}, KEYS)
    second = dedup_id_for({"x": "acct", "y": "1#p"}, KEYS)
    assert first != second
    assert len(first) == len(second) == 64  # SHA-256 hex: joining them with '#' would be ambiguous


def test_messages_whose_joined_keys_would_collide_are_both_delivered(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    messages = [{"x": "acct#1", "y": "p", "cents": 100}, {"x": "acct", "y": "1#p", "cents": 999}]
    result = publish(sns, topic, messages, keys=KEYS, group_id="g")
    assert result.ok
    assert [json.loads(m["Body"]) for m in drain(sqs, queue_url)] == messages


def test_a_failed_message_stops_its_group_and_a_retry_keeps_the_groups_order(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    refuse(sns, lambda entry: '"a2"' in entry["Message"])
    names = ["a1", "b1", "a2", "b2", "a3", "b3", "a4"]
    messages = [{"x": name, "y": "1"} for name in names]
    result = publish(sns, topic, messages, keys=KEYS, group_id=lambda m: m["x"][0])
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
    retried = publish(
        sns, topic, [messages[i] for i in result.unpublished], keys=KEYS, group_id=lambda m: m["x"][0]
    )
    assert retried.ok
    again = drain(sqs, queue_url)
    assert [json.loads(m["Body"])["x"] for m in again] == ["a2", "a3", "a4"]
    assert {m["Attributes"]["MessageGroupId"] for m in again} == {"a"}


def test_a_message_the_consumer_would_reject_stops_the_call_before_anything_is_sent(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    messages = [{"x": f"a{i}", "y": "1"} for i in range(11)] + [{"x": "a11"}]
    with pytest.raises(ValueError, match=r"^message 11: sort key field 'y' is missing from the body"):
        publish(sns, topic, messages, keys=KEYS, group_id="g")
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
    result = publish(sns, topic, messages, keys=KEYS, group_id=lambda m: m["x"])  # 25 groups: 10 + 10 + 5
    assert len(calls) == 2
    assert [json.loads(m["Body"])["x"] for m in drain(sqs, queue_url)] == [f"m{i:02}" for i in range(10)]
    assert [f.index for f in result.failed] == list(range(10, 20))
    assert {(f.code, f.message) for f in result.failed} == {("Throttled", "slow down")}
    assert result.unpublished == list(range(10, 25))
    assert result.statuses[20:] == ["not_attempted"] * 5


@pytest.fixture
def standard_topic_and_queue(sqs):
    """A standard topic with a standard queue subscribed with raw message delivery (``fifo=False``)."""
    import boto3

    sns = boto3.client("sns", region_name="us-east-1")
    topic = sns.create_topic(Name="orders")["TopicArn"]
    queue_url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
    return sns, topic, queue_url


def test_a_standard_topic_gets_no_deduplication_id_and_needs_no_group(standard_topic_and_queue, sqs):
    sns, topic, queue_url = standard_topic_and_queue
    calls = []
    sns.meta.events.register(
        "before-parameter-build.sns.PublishBatch", lambda params, **_: calls.append(params)
    )
    messages = [{"x": f"a{i:02}", "y": "b"} for i in range(12)]
    result = publish(sns, topic, messages, keys=KEYS)
    assert result.ok, result.failed
    received = drain(sqs, queue_url)
    assert sorted(json.loads(m["Body"])["x"] for m in received) == [m["x"] for m in messages]
    assert not any("MessageDeduplicationId" in m["Attributes"] for m in received)
    # No order to keep on a standard topic: full requests, whatever the groups.
    assert [len(c["PublishBatchRequestEntries"]) for c in calls] == [10, 2]


def test_a_group_id_on_a_standard_topic_is_passed_on_for_fair_queues(standard_topic_and_queue):
    sns, topic, _ = standard_topic_and_queue
    calls = []
    sns.meta.events.register(
        "before-parameter-build.sns.PublishBatch", lambda params, **_: calls.append(params)
    )
    assert publish(
        sns, topic, [{"x": "a", "y": "1"}, {"x": "b", "y": "1"}], keys=KEYS, group_id="tenant-1"
    ).ok
    (request,) = calls
    assert [e.get("MessageGroupId") for e in request["PublishBatchRequestEntries"]] == ["tenant-1"] * 2
    assert not any("MessageDeduplicationId" in e for e in request["PublishBatchRequestEntries"])


def test_without_a_topic_messages_go_to_the_fifo_queue_in_order_and_are_stored_once(
    pipeline, sqs, dynamodb, make_handler
):
    from idempotent_local.events import lambda_sqs_event

    _, _, queue_url, queue_arn = pipeline
    handler, stream = make_handler()
    messages = [{"x": "a", "y": str(i), "v": i} for i in range(3)] + [{"x": "a", "y": "0", "v": 0}]
    assert publish(sqs, queue_url, messages, keys=KEYS, group_id=lambda m: m["x"]).ok
    received = drain(sqs, queue_url)
    assert [json.loads(m["Body"]) for m in received] == messages[:3]  # the exact resend is dropped by SQS
    assert [m["Attributes"]["MessageDeduplicationId"] for m in received] == [
        dedup_id_for(m, KEYS) for m in messages[:3]
    ]
    assert {m["Attributes"]["MessageGroupId"] for m in received} == {"a"}
    handler(lambda_sqs_event(received, queue_arn), None)
    assert [line["outcome"] for line in record_logs(stream)] == ["processed"] * 3
    assert sorted((i["sk"]["S"], i["v"]["N"]) for i in scan(dynamodb)) == [("0", "0"), ("1", "1"), ("2", "2")]


def test_without_a_topic_a_standard_queue_gets_the_messages_without_ids(sqs):
    queue_url = sqs.create_queue(QueueName="plain")["QueueUrl"]
    assert publish(sqs, queue_url, [{"x": "a", "y": "1"}], keys=KEYS).ok
    (received,) = drain(sqs, queue_url)
    assert json.loads(received["Body"]) == {"x": "a", "y": "1"}
    assert "MessageDeduplicationId" not in received["Attributes"]


def test_a_fifo_destination_needs_a_group_id(topic_and_queue):
    sns, topic, _ = topic_and_queue
    with pytest.raises(
        ValueError, match=r"^group_id is required for the FIFO destination arn:aws:sns:.*orders\.fifo"
    ):
        publish(sns, topic, [{"x": "a", "y": "1"}], keys=KEYS)


def test_dedup_id_keys_cannot_go_through_a_standard_topic(standard_topic_and_queue, sqs):
    sns, topic, queue_url = standard_topic_and_queue
    keys = ConsumerKeys(["x"], key_source="dedup_id")
    with pytest.raises(ValueError, match="key_source dedup_id needs a FIFO topic or queue"):
        publish(sns, topic, [{"x": "a"}], keys=keys)
    assert drain(sqs, queue_url) == []


def test_a_request_holds_at_most_256_kib_of_messages(topic_and_queue, sqs):
    sns, topic, queue_url = topic_and_queue
    calls = []
    sns.meta.events.register(
        "before-parameter-build.sns.PublishBatch", lambda params, **_: calls.append(params)
    )
    seen = []
    messages = [{"x": f"a{i}", "y": "1", "pad": "p" * 30_000} for i in range(10)]
    assert publish(sns, topic, messages, keys=KEYS, group_id=lambda m: m["x"], progress=seen.append).ok
    assert [len(c["PublishBatchRequestEntries"]) for c in calls] == [8, 2]
    assert len(seen) == 2 and seen[-1].ok
    assert len(drain(sqs, queue_url)) == 10
