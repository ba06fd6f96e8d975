"""Event source mappings as the runner reads them back from the emulator: SQS queues and DynamoDB streams,
with Lambda's defaults where a mapping sets nothing. ``local status`` describes them from the emulator's
inventory; ``local run`` polls them (:mod:`idempotent_local.runner`)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


@dataclass(frozen=True)
class _Mapping:
    """What every event source mapping has, as read back from the emulator."""

    uuid: str
    function_arn: str
    batch_size: int
    report_batch_item_failures: bool
    enabled: bool

    @property
    def function_name(self) -> str:
        return self.function_arn.rsplit(":", 1)[-1]


def _common(esm: dict[str, Any], batch_size: int) -> dict[str, Any]:
    """The fields of :class:`_Mapping` from a mapping's configuration (``batch_size``: Lambda's default)."""
    return {
        "uuid": esm["UUID"],
        "function_arn": esm["FunctionArn"],
        "batch_size": int(esm.get("BatchSize", batch_size)),
        "report_batch_item_failures": "ReportBatchItemFailures" in (esm.get("FunctionResponseTypes") or []),
        "enabled": esm.get("State", "Enabled") == "Enabled",
    }


@dataclass(frozen=True)
class Mapping(_Mapping):
    """An SQS event source mapping, as read back from the emulator."""

    queue_arn: str
    queue_url: str
    max_receive_count: int | None = None  # the queue's redrive policy: after this many receives, the DLQ

    @property
    def source_arn(self) -> str:
        return self.queue_arn

    def describe(self) -> str:
        return f"{self.queue_arn} -> {self.function_name} (batch {self.batch_size})"


@dataclass(frozen=True)
class StreamMapping(_Mapping):
    """A DynamoDB stream event source mapping, as read back from the emulator (Lambda's defaults where it
    sets nothing: ``-1`` is "until the record leaves the stream")."""

    stream_arn: str
    starting_position: str  # TRIM_HORIZON or LATEST
    created: float  # LastModified, epoch seconds: where a LATEST mapping without a checkpoint starts
    filters: tuple[str, ...] = ()  # FilterCriteria patterns
    maximum_retry_attempts: int = -1
    maximum_record_age: int = -1
    bisect: bool = False
    on_failure: str | None = None  # DestinationConfig.OnFailure: an SQS queue or SNS topic ARN
    batching_window: int = 0
    parallelization_factor: int = 1

    @property
    def source_arn(self) -> str:
        return self.stream_arn

    def describe(self) -> str:
        settings = [f"batch {self.batch_size}", f"from {self.starting_position}"]
        if self.filters:
            settings.append(plural(len(self.filters), "filter"))
        if self.parallelization_factor > 1:
            settings.append(f"parallelization factor {self.parallelization_factor} run as 1")
        return f"{self.stream_arn} -> {self.function_name} ({', '.join(settings)})"


def stream_mapping(esm: dict[str, Any]) -> StreamMapping:
    modified = esm.get("LastModified")
    destination = (esm.get("DestinationConfig") or {}).get("OnFailure", {}).get("Destination")
    return StreamMapping(
        **_common(esm, 100),
        stream_arn=esm["EventSourceArn"],
        starting_position=esm.get("StartingPosition") or "TRIM_HORIZON",
        created=modified.timestamp()
        if isinstance(modified, datetime.datetime)
        else float(modified)
        if isinstance(modified, int | float)
        else 0.0,
        filters=tuple(f["Pattern"] for f in (esm.get("FilterCriteria") or {}).get("Filters", [])),
        maximum_retry_attempts=int(esm.get("MaximumRetryAttempts", -1)),
        maximum_record_age=int(esm.get("MaximumRecordAgeInSeconds", -1)),
        bisect=bool(esm.get("BisectBatchOnFunctionError", False)),
        on_failure=destination or None,
        batching_window=int(esm.get("MaximumBatchingWindowInSeconds", 0)),
        parallelization_factor=int(esm.get("ParallelizationFactor", 1)),
    )


def queue_mapping(esm: dict[str, Any], sqs: Any = None) -> Mapping:
    """An SQS mapping; with ``sqs`` (a client), its queue's URL and redrive policy are looked up too (a
    ClientError when the queue does not exist)."""
    arn = esm["EventSourceArn"]
    url, policy = "", None
    if sqs is not None:
        url = queue_url(sqs, arn)
        redrive = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
        policy = redrive.get("Attributes", {}).get("RedrivePolicy")
    return Mapping(
        **_common(esm, 10),
        queue_arn=arn,
        queue_url=url,
        max_receive_count=int(json.loads(policy)["maxReceiveCount"]) if policy else None,
    )


def queue_url(sqs: Any, arn: str) -> str:
    """The URL of the queue ``arn`` names (``GetQueueUrl``, in its owner's account)."""
    _, _, _, _, account, name = arn.split(":", 5)
    return str(sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"])


def read(configurations: Iterable[dict[str, Any]], sqs: Any = None) -> list[Mapping | StreamMapping]:
    """The SQS and DynamoDB stream mappings among ``configurations`` (as ``ListEventSourceMappings`` gives
    them; other sources are not run); ``sqs`` as for :func:`queue_mapping`."""
    found: list[Mapping | StreamMapping] = []
    for esm in configurations:
        service = esm["EventSourceArn"].split(":")[2]
        if service == "sqs":
            found.append(queue_mapping(esm, sqs))
        elif service == "dynamodb":
            found.append(stream_mapping(esm))
    return found


__all__ = ["Mapping", "StreamMapping", "plural", "queue_mapping", "queue_url", "read", "stream_mapping"]
