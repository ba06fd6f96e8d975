"""Fixtures for the consumer runtime's tests: moto in-process (no network), a table, a FIFO DLQ, records."""

from __future__ import annotations

import functools
import io
import sys
import threading
from pathlib import Path
from typing import Any

import boto3
import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.flow import build_handler
from moto import mock_aws

# The example processing functions (runtime_examples.py) import as a top-level module, as in a code asset.
sys.path.insert(0, str(Path(__file__).parent))

from runtime_helpers import REGION, TABLE, create_table


@pytest.fixture(autouse=True)
def aws(monkeypatch: pytest.MonkeyPatch):
    """A fresh in-process moto for each test, with fake credentials so nothing can reach AWS."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    _serialise_moto_writes(monkeypatch)
    with mock_aws():
        yield


def _serialise_moto_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB applies each conditional write and transaction atomically; moto's in-process backend checks
    the condition, then writes, without a lock, so concurrent threads could both pass a condition.
    Serialising moto's write operations restores DynamoDB's atomicity (and nothing else) for the races."""
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.RLock()
    for name in ("put_item", "update_item", "delete_item", "transact_write_items"):
        original = getattr(DynamoDBBackend, name)

        def locked(self, *args, __original=original, **kwargs):
            with lock:
                return __original(self, *args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, functools.wraps(original)(locked))


def _client(service: str):
    # Explicit fake credentials: the client never depends on (or reaches) a real account.
    return boto3.client(
        service, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


@pytest.fixture(scope="session")
def _shared_clients():
    """Clients are slow to create and moto resets its state per test, not per client: share them.
    Tests that register botocore event hooks use ``fresh_dynamodb`` so their hooks do not leak."""
    return {"dynamodb": _client("dynamodb"), "sqs": _client("sqs")}


@pytest.fixture
def dynamodb(_shared_clients):
    return _shared_clients["dynamodb"]


@pytest.fixture
def fresh_dynamodb():
    return _client("dynamodb")


@pytest.fixture
def sqs(_shared_clients):
    return _shared_clients["sqs"]


@pytest.fixture
def table(dynamodb) -> str:
    return create_table(dynamodb, TABLE)


@pytest.fixture
def dlq_url(sqs) -> str:
    return sqs.create_queue(QueueName="consumer-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]


@pytest.fixture
def sleeps() -> list[float]:
    """The delays the runtime's retries waited for (tests inject a sleep that returns at once)."""
    return []


@pytest.fixture
def make_handler(table, dynamodb, sqs, sleeps):
    """``make_handler(fn=None, clock=None, client=None, sleep=None, **config)`` -> (handler, log stream);
    ``fn`` is the processor, ``client`` a DynamoDB client to use instead of the shared one. Retries do not
    wait (their delays are recorded in ``sleeps``); every record is logged (LOG_LEVEL=DEBUG) unless the
    test sets ``log_level``."""

    def make(fn: Any = None, clock: Any = None, client: Any = None, sleep: Any = None, **overrides: Any):
        overrides.setdefault("log_level", "DEBUG")
        overrides.setdefault("table_name", table)
        config = Config(**overrides)
        stream = io.StringIO()
        extra = {"clock": clock} if clock is not None else {}
        handler = build_handler(
            config,
            dynamodb_client=client or dynamodb,
            sqs_client=sqs,
            processor=fn,
            log_stream=stream,
            sleep=sleep or sleeps.append,
            **extra,
        )
        return handler, stream

    return make


@pytest.fixture
def pipeline(sqs):
    """A FIFO topic with a FIFO queue subscribed with raw message delivery, as the constructs deploy it."""
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="orders.fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
    queue_url = sqs.create_queue(QueueName="orders.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
    )
    return sns, topic, queue_url, queue_arn
