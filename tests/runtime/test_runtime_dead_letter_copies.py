"""Which copies of a dead letter can exist, per DLQ type (docs/runtime.md, "The dead-letter queue, once").

A SendMessage whose response is lost may have been applied; the runtime sends it again rather than risk the
record. A FIFO DLQ drops the second copy (its deduplication id is the source message id); a standard DLQ
keeps it - and every copy carries the same ``idempotency.details.source_message_id``, by which every reader
counts a dead letter once.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.flow import build_handler
from runtime_helpers import REGION, dlq_details, drain, event, record


def lose_first_send_response(sqs_client: Any) -> list[int]:
    """The first SendMessage reaches SQS and is applied, then its response times out on the way back."""
    from botocore.exceptions import ReadTimeoutError

    sends: list[int] = []

    def timed_out(**_: Any) -> None:
        sends.append(len(sends) + 1)
        if len(sends) == 1:
            raise ReadTimeoutError(endpoint_url="https://sqs.invalid")

    sqs_client.meta.events.register("after-call.sqs.SendMessage", timed_out)
    return sends


@pytest.mark.parametrize(("dlq_name", "copies"), [("dead.fifo", 1), ("dead", 2)])
def test_a_lost_send_response_is_sent_again_and_counted_once_by_its_source_message_id(
    table, dynamodb, sqs, dlq_name, copies
):
    attributes = {"FifoQueue": "true"} if dlq_name.endswith(".fifo") else {}
    dlq_url = sqs.create_queue(QueueName=dlq_name, Attributes=attributes)["QueueUrl"]
    lossy = boto3.client("sqs", region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
    sends = lose_first_send_response(lossy)
    handler = build_handler(
        Config(table_name=table, dlq_url=dlq_url),
        dynamodb_client=dynamodb,
        sqs_client=lossy,
        sleep=lambda s: None,
    )
    poison = record("{broken")
    (result,) = handler.process_batch(event(poison), None)
    assert result.outcome == "quarantined" and sends == [1, 2]  # the record itself is never at risk
    dead = drain(sqs, dlq_url)
    assert len(dead) == copies  # FIFO: SQS drops the resend; standard: both stay
    assert {dlq_details(copy)["source_message_id"] for copy in dead} == {poison["messageId"]}
    assert {copy["Body"] for copy in dead} == {poison["body"]}
