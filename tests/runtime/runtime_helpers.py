"""Helpers shared by the runtime tests: Lambda SQS records, table scans, queue draining, log parsing."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

REGION = "us-east-1"
TABLE = "documents"


def record(
    body: Any,
    *,
    group: str | None = "g1",
    message_id: str | None = None,
    dedup_id: str | None = None,
    receive_count: int = 1,
) -> dict[str, Any]:
    """One record of Lambda's SQS event for a FIFO queue (``group=None``: a standard queue)."""
    text = body if isinstance(body, str) else json.dumps(body)
    attributes = {
        "ApproximateReceiveCount": str(receive_count),
        "SentTimestamp": "1700000000000",
        "SenderId": "AIDAEXAMPLE",
        "ApproximateFirstReceiveTimestamp": "1700000000001",
    }
    if group is not None:
        attributes.update(
            {
                "MessageGroupId": group,
                "MessageDeduplicationId": dedup_id or uuid.uuid4().hex,
                "SequenceNumber": "18880000000000000000",
            }
        )
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": "handle-" + uuid.uuid4().hex,
        "body": text,
        "attributes": attributes,
        "messageAttributes": {},
        "md5OfBody": "0" * 32,
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:consumer.fifo",
        "awsRegion": REGION,
    }


def event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def failures(response: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


QUARANTINE_SORT = "idempotency#quarantine"


def _is_quarantine_record(item: dict[str, Any]) -> bool:
    return any(value.get("S") == QUARANTINE_SORT for value in item.values())


def scan(dynamodb, table: str = TABLE, *, quarantine_records: bool = False) -> list[dict[str, Any]]:
    """Every item of the table; the runtime's quarantine records only when asked for."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return [item for item in items if quarantine_records or not _is_quarantine_record(item)]


def quarantine_records(dynamodb, table: str = TABLE) -> list[dict[str, Any]]:
    return [item for item in scan(dynamodb, table, quarantine_records=True) if _is_quarantine_record(item)]


def drain(sqs, queue_url: str) -> list[dict[str, Any]]:
    """Receive (and delete) every message of a queue, with all attributes."""
    messages: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not batch:
            return messages
        for message in batch:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        messages.extend(batch)


def dlq_reason(message: dict[str, Any]) -> str:
    """The runtime's reason on a dead letter (``drain`` output)."""
    return message["MessageAttributes"]["idempotency.reason"]["StringValue"]


def dlq_details(message: dict[str, Any]) -> dict[str, Any]:
    """The runtime's details on a dead letter: kind, source_message_id, key, fingerprints, ..."""
    return json.loads(message["MessageAttributes"]["idempotency.details"]["StringValue"])


def log_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def record_logs(stream: io.StringIO) -> list[dict[str, Any]]:
    return [line for line in log_lines(stream) if "outcome" in line]


def metrics(stream: io.StringIO) -> list[dict[str, Any]]:
    return [line for line in log_lines(stream) if "_aws" in line]


# Guarded mode's three UpdateItem requests, told apart by their update expression.
CLAIM, COMPLETION, EXTENSION = "claim", "completion", "extension"
_STEP_OF_UPDATE = (
    ("SET #status = :in_progress", CLAIM),
    ("SET #status = :status", COMPLETION),
    ("SET #lease", EXTENSION),
)


def guarded_step(params: dict[str, Any] | None) -> str | None:
    """Which guarded step a DynamoDB request is (``params``: botocore's ``before-call`` request dict)."""
    try:
        update = json.loads((params or {}).get("body") or b"{}").get("UpdateExpression", "")
    except ValueError:
        return None
    return next((step for prefix, step in _STEP_OF_UPDATE if update.startswith(prefix)), None)


class Clock:
    """A fake clock at ``now`` (epoch seconds); ``sleep`` moves it (retries wait with the injected sleep)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def create_table(dynamodb: Any, name: str) -> str:
    """A table keyed (pk, sk), on demand, as the constructs make one; returns its name."""
    keys = (("pk", "HASH"), ("sk", "RANGE"))
    dynamodb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"} for key, _ in keys],
        KeySchema=[{"AttributeName": key, "KeyType": kind} for key, kind in keys],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


class EnvironmentDied(BaseException):
    """The execution environment disappears (a crash, a timeout): nothing after this point runs."""


def die_before_completion(handler: Any, client: Any, delivery: dict[str, Any]) -> None:
    """Deliver ``delivery``: the effect runs, then the environment dies before the key's completion."""
    import pytest

    died: list[bool] = []

    def die(params: dict[str, Any], **_: Any) -> None:
        if not died and guarded_step(params) == COMPLETION:
            died.append(True)
            raise EnvironmentDied()

    client.meta.events.register("before-call.dynamodb.UpdateItem", die)
    with pytest.raises(EnvironmentDied):
        handler(event(delivery), None)


def tag_guarded_steps(client: Any) -> None:
    """Put each UpdateItem's guarded step in its request context (``context["guarded_step"]``), where
    ``after-call`` and ``needs-retry`` handlers of the same request find it."""

    def tag(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["guarded_step"] = guarded_step(params)

    client.meta.events.register_first("before-call.dynamodb.UpdateItem", tag)


def inject_errors(
    client: Any,
    operation: str,
    code: str,
    *,
    every: int = 1,
    status: int = 400,
    step: str | None = None,
    **extra: Any,
):
    """Make every ``every``-th ``operation`` call of ``client`` (of guarded ``step`` only, when given) fail
    with ``code`` before it reaches moto (botocore's ``before-call`` event short-circuits the request).
    Returns the list of failed call numbers."""
    from botocore.awsrequest import AWSResponse

    calls = {"n": 0}
    failed: list[int] = []

    def fail(params: dict[str, Any] | None = None, **_: Any):
        if step is not None and guarded_step(params) != step:
            return None
        calls["n"] += 1
        if calls["n"] % every:
            return None
        failed.append(calls["n"])
        parsed = {
            "Error": {"Code": code, "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        parsed.update(extra)
        return AWSResponse("https://dynamodb.invalid", status, {}, None), parsed

    service = client.meta.service_model.service_name
    client.meta.events.register(f"before-call.{service}.{operation}", fail)
    return failed


def receive_event(sqs: Any, queue_url: str, queue_arn: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Receive up to 10 messages with every attribute and build Lambda's event from them."""
    from idempotent_local.events import lambda_sqs_event

    messages = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=10,
        MessageSystemAttributeNames=["All"],
        MessageAttributeNames=["All"],
    ).get("Messages", [])
    return lambda_sqs_event(messages, queue_arn), messages


def deliver_until_empty(sqs: Any, queue_url: str, queue_arn: str, handler: Any, max_rounds: int = 100) -> int:
    """What Lambda's event source mapping does with ReportBatchItemFailures: invoke with each batch, delete
    the records that succeeded, make the failed ones visible again (at once, instead of after the
    visibility timeout). Returns the number of invocations until the queue is empty."""
    for invocation in range(max_rounds):
        lambda_event, messages = receive_event(sqs, queue_url, queue_arn)
        if not messages:
            return invocation
        failed = set(failures(handler(lambda_event, None)))
        for message in messages:
            if message["MessageId"] in failed:
                sqs.change_message_visibility(
                    QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
            else:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    raise AssertionError(f"queue not empty after {max_rounds} invocations")


def lose_responses(client: Any, operation: str, step: str | None = None, *, every: int = 4) -> list[int]:
    """Every ``every``-th successful ``operation`` of ``client`` (of guarded ``step`` only, when given)
    reaches DynamoDB and is applied, but its response is lost on the way back: botocore is made to send the
    same request again, as after a read timeout (its ``needs-retry`` event, whatever the client's own retry
    settings). Returns the numbers of the calls whose response was lost."""
    calls = {"n": 0}
    lost: list[int] = []

    def retry(response=None, caught_exception=None, request_dict=None, **_: Any):
        if caught_exception is not None or response is None or response[0].status_code != 200:
            return None
        if step is not None and guarded_step(request_dict) != step:
            return None
        calls["n"] += 1
        if calls["n"] % every:
            return None
        lost.append(calls["n"])
        return 0  # retry at once

    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(f"needs-retry.{service}.{operation}", retry)
    return lost


class Outcomes:
    """A handler that counts the outcome of every record of every delivery (for ``deliver_until_empty``)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.counts: dict[str, int] = {}

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        results = self.handler.process_batch(event, context)
        for result in results:
            outcome = str(result.outcome)
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
        return {"batchItemFailures": [{"itemIdentifier": r.message.message_id} for r in results if r.failed]}


def sqs_size(params: dict[str, Any]) -> int:
    """What real SQS counts against a queue's maximum message size: the body and every message attribute's
    name, data type and value (moto counts the body alone)."""
    total = len(params["MessageBody"].encode())
    for name, value in (params.get("MessageAttributes") or {}).items():
        data = value.get("StringValue")
        data = data.encode() if data is not None else value.get("BinaryValue", b"")
        total += len(name) + len(value["DataType"]) + len(data)
    return total


def limit_like_sqs(client: Any, limit: int) -> list[int]:
    """Make ``client``'s SendMessage refuse, as SQS does, a message over ``limit`` bytes counted the way SQS
    counts (:func:`sqs_size`). Returns the size of every SendMessage, refused or not."""
    from botocore.exceptions import ClientError

    sizes: list[int] = []

    def check(params: dict[str, Any], **_: Any) -> None:
        sizes.append(sqs_size(params))
        if sizes[-1] > limit:
            error = {
                "Code": "InvalidParameterValue",
                "Message": "One or more parameters are invalid. Reason: Message must be shorter than "
                f"{limit} bytes.",
            }
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, "SendMessage")

    client.meta.events.register("before-parameter-build.sqs.SendMessage", check)
    return sizes


class Context:
    """A Lambda context whose remaining time stands still at ``millis``."""

    def __init__(self, millis: int) -> None:
        self.millis = millis

    def get_remaining_time_in_millis(self) -> int:
        return self.millis
