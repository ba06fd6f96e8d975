"""What a million messages cost, from this run's measurements and AWS's published on-demand prices.

Every input that differs between the contenders is measured in the same run (DynamoDB requests per new and
duplicate message by operation, batch latency at a stated DynamoDB latency, log bytes per record); the
rest are stated assumptions, the same for every contender. Prices are the us-east-1 on-demand list prices,
with the date they were read; rerun with new prices by editing :data:`PRICES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

PRICES_READ = "2026-11-23"


@dataclass(frozen=True)
class Prices:
    """US East (N. Virginia), on-demand, USD."""

    dynamodb_per_million_wru: float = 0.625  # DynamoDB on-demand write request units (since Nov 2024)
    lambda_arm_per_gb_second: float = 0.0000133334  # Lambda duration, Arm (the constructs' default)
    lambda_per_million_requests: float = 0.20
    logs_per_gb_ingested: float = 0.50  # CloudWatch Logs, Standard log class
    sqs_fifo_per_million_requests: float = 0.50
    sns_fifo_per_million_publishes: float = 0.30
    sns_fifo_per_gb_payload: float = 0.017


PRICES = Prices()


@dataclass(frozen=True)
class Assumptions:
    """The same for every contender."""

    duplicate_share: float = 0.01  # of delivered messages, absorbed by the idempotency check
    message_bytes: int = 1024  # body size: one write request unit per stored item, one 64 KB SQS chunk
    batch_size: int = 10  # records per invocation (the FIFO maximum)
    memory_mb: int = 256  # the consumer's default memory size
    # Lambda's own START / END / REPORT lines per invocation (the same for every function).
    platform_log_bytes_per_invocation: int = 350
    # SNS delivery (SendMessage) + ReceiveMessage and DeleteMessageBatch per batch, per message.
    sqs_requests_per_message: float = 1.0 + 2.0 / 10
    # A cancelled transaction is billed like the writes it tried (an upper bound).
    transaction_items: int = 2  # the benchmark processor's one Update plus the marker


ASSUMPTIONS = Assumptions()


@dataclass(frozen=True)
class Inputs:
    """One contender's measured inputs."""

    name: str
    new_requests: Mapping[str, float]  # DynamoDB requests per new message, by operation
    duplicate_requests: Mapping[str, float]  # per duplicate
    batch_latency_s: float  # one 10-record batch over 10 groups
    log_bytes_per_record: float


@dataclass
class Cost:
    """USD per million delivered messages, by component."""

    name: str
    components: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.components.values())


def write_units(requests: Mapping[str, float], assumptions: Assumptions = ASSUMPTIONS) -> float:
    """Write request units for items up to 1 KB: 1 a request, 2 an item of a transaction."""
    transaction = 2 * assumptions.transaction_items
    return sum(count * (transaction if op == "TransactWriteItems" else 1) for op, count in requests.items())


def cost_per_million(inputs: Inputs, prices: Prices = PRICES, assumptions: Assumptions = ASSUMPTIONS) -> Cost:
    million = 1_000_000
    share = assumptions.duplicate_share
    wru = (1 - share) * write_units(inputs.new_requests, assumptions) + share * write_units(
        inputs.duplicate_requests, assumptions
    )
    invocations = million / assumptions.batch_size
    gb_seconds = invocations * assumptions.memory_mb / 1024 * inputs.batch_latency_s
    log_bytes = (
        million * inputs.log_bytes_per_record + invocations * assumptions.platform_log_bytes_per_invocation
    )
    gigabyte = 1024**3
    return Cost(
        inputs.name,
        {
            "DynamoDB writes": wru * prices.dynamodb_per_million_wru,
            "Lambda duration": gb_seconds * prices.lambda_arm_per_gb_second,
            "Lambda requests": invocations / million * prices.lambda_per_million_requests,
            "CloudWatch Logs": log_bytes / gigabyte * prices.logs_per_gb_ingested,
            "SQS requests": assumptions.sqs_requests_per_message * prices.sqs_fifo_per_million_requests,
            "SNS publish": prices.sns_fifo_per_million_publishes
            + assumptions.message_bytes * million / gigabyte * prices.sns_fifo_per_gb_payload,
        },
    )


def method(assumptions: Assumptions = ASSUMPTIONS) -> str:
    return (
        f"USD per million delivered messages ({assumptions.duplicate_share:.0%} duplicates), us-east-1 "
        f"on-demand list prices read {PRICES_READ} (DynamoDB ${PRICES.dynamodb_per_million_wru}/M write "
        f"units, Lambda Arm ${PRICES.lambda_arm_per_gb_second}/GB-s and "
        f"${PRICES.lambda_per_million_requests}/M requests, CloudWatch Logs "
        f"${PRICES.logs_per_gb_ingested}/GB, SQS FIFO ${PRICES.sqs_fifo_per_million_requests}/M requests, "
        f"SNS FIFO ${PRICES.sns_fifo_per_million_publishes}/M publishes + ${PRICES.sns_fifo_per_gb_payload}"
        "/GB). Measured in this run, per contender: DynamoDB requests per new and duplicate message by "
        "operation (items up to 1 KB: 1 write unit per put/update, 2 per transaction item, a cancelled "
        "transaction billed like its writes), the 10-record, 10-group batch latency at 10 ms per DynamoDB "
        f"request (x {assumptions.memory_mb} MB), log bytes per record at the default level plus "
        f"{assumptions.platform_log_bytes_per_invocation} B of Lambda's own lines per invocation. SQS "
        f"({assumptions.sqs_requests_per_message:g} requests per message) and SNS are the same for every "
        "contender."
    )
