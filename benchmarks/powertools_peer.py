"""The peer: Powertools for AWS Lambda (Python) idempotency + FIFO batch processing, as its docs show it.

The realistic equivalent of our document mode: each SQS record's idempotency key is the message body's
(x, y) pair; the record handler returns the item, which Powertools stores once per key as the idempotency
record's result (`data`). This is the most favourable setup for Powertools: the item rides inside the
idempotency record, so there is no separate business write. A user who also writes the item to their own
table pays one more request per new message than counted here.

The table is Powertools' documented one: partition key `id` (string), TTL attribute `expiration`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

# Same record lifetime as our runtime's default TTL_SECONDS.
EXPIRES_AFTER_SECONDS = 7 * 24 * 3600

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def build_powertools_handler(
    table_name: str, *, dynamodb_client: Any = None, metrics_namespace: str | None = None
) -> Handler:
    """A Lambda handler for an SQS FIFO event source, idempotent per (x, y) through Powertools.

    ``metrics_namespace``: also publish the batch's counters (records processed and failed) with Powertools
    Metrics, one Embedded Metric Format line per invocation, as a Powertools consumer that reports what
    ours reports would (Powertools cannot tell a duplicate from a new record: the idempotent function
    returns the stored result either way).
    """
    persistence = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=dynamodb_client)
    config = IdempotencyConfig(
        event_key_jmespath="powertools_json(body).[x, y]",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=EXPIRES_AFTER_SECONDS,
    )
    # skip_group_on_error: a failure blocks only its own message group, as in our runtime.
    processor = SqsFifoPartialProcessor(skip_group_on_error=True)

    @idempotent_function(data_keyword_argument="record", config=config, persistence_store=persistence)
    def record_handler(record: SQSRecord) -> dict[str, Any]:
        return json.loads(record.body)

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        config.register_lambda_context(context)
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )

    if metrics_namespace is None:
        return handler

    from aws_lambda_powertools import Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    metrics = Metrics(namespace=metrics_namespace, service="consumer")

    @metrics.log_metrics
    def handler_with_metrics(event: dict[str, Any], context: Any) -> dict[str, Any]:
        response = handler(event, context)
        failed = len(response.get("batchItemFailures", []))
        metrics.add_metric(name="processed", unit=MetricUnit.Count, value=len(event["Records"]) - failed)
        metrics.add_metric(name="failed", unit=MetricUnit.Count, value=failed)
        return response

    return handler_with_metrics


def create_powertools_table(client: Any, table_name: str) -> None:
    """Powertools' documented idempotency table: `id` hash key, on-demand, TTL on `expiration`."""
    client.create_table(
        TableName=table_name,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"}
    )
