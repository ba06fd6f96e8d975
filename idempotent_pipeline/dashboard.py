"""PipelineDashboard: one CloudWatch dashboard with what an operator of a pipeline looks at first."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct
from idempotent_runtime.contract import Mode

from idempotent_pipeline._alarms import ONE_MINUTE
from idempotent_pipeline.consumer import IdempotentConsumer
from idempotent_pipeline.messaging import Messaging
from idempotent_pipeline.table import IdempotencyTable

WIDTH = 8  # three graphs per row of 24 units
MAXIMUM: dict[str, Any] = {"period": ONE_MINUTE, "statistic": "Maximum"}
SUM: dict[str, Any] = {"period": ONE_MINUTE, "statistic": "Sum"}


class PipelineDashboard(Construct):
    """Throughput by outcome, duplicate rate, conflicts and misconfiguration, dead-letter queue depths, the
    oldest message's age, function duration and concurrency, DynamoDB write throttles.

    :param consumer: the pipeline's consumer. Required.
    :param table: its table. Required.
    :param messaging: its messaging, for the subscription's dead-letter queue. Default: none (the consumer's
        queue and dead-letter queue only).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        consumer: IdempotentConsumer,
        table: IdempotencyTable,
        messaging: Messaging | None = None,
    ) -> None:
        super().__init__(scope, id)
        function = consumer.function
        queues = [("dead-letter queue", consumer.dead_letter_queue)]
        if messaging is not None and messaging.subscription_dead_letter_queue is not None:
            queues.append(("subscription dead-letter queue", messaging.subscription_dead_letter_queue))
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=None)
        for row in (
            (
                _graph(
                    "Records by outcome (per minute)",
                    consumer.metric_processed(label="processed"),
                    consumer.metric_duplicates(label="duplicates"),
                    *([consumer.metric_stale(label="stale")] if consumer.mode == Mode.VERSIONED else []),
                    consumer.metric_quarantined(label="quarantined"),
                    consumer.metric_failed(label="failed"),
                    stacked=True,
                ),
                _graph("Duplicate rate (%)", consumer.metric_duplicate_rate()),
                _graph(
                    "Conflicts and misconfiguration",
                    consumer.metric_conflicts(label="conflicts"),
                    consumer.metric_misconfigured(label="misconfigured"),
                ),
            ),
            (
                _graph(
                    "Dead-letter queues (visible messages)",
                    *(
                        queue.metric_approximate_number_of_messages_visible(**MAXIMUM, label=label)
                        for label, queue in queues
                        if queue is not None
                    ),
                ),
                _graph(
                    "Oldest message in the queue (seconds)",
                    consumer.queue.metric_approximate_age_of_oldest_message(**MAXIMUM, label="age"),
                ),
                _graph(
                    "DynamoDB write throttles",
                    table.table.metric("WriteThrottleEvents", **SUM, label="write throttles"),
                ),
            ),
            (
                _graph(
                    "Function duration (ms)",
                    function.metric_duration(period=ONE_MINUTE, statistic="Average", label="average"),
                    function.metric_duration(period=ONE_MINUTE, statistic="p99", label="p99"),
                ),
                _graph(
                    "Function concurrency and throttles",
                    function.metric("ConcurrentExecutions", **MAXIMUM, label="concurrent"),
                    function.metric_throttles(**SUM, label="throttles"),
                ),
                _graph("Invocation errors", function.metric_errors(**SUM, label="errors")),
            ),
        ):
            self.dashboard.add_widgets(*row)


def _graph(title: str, *metrics: cloudwatch.IMetric, stacked: bool | None = None) -> cloudwatch.GraphWidget:
    """A graph a third of the dashboard wide."""
    return cloudwatch.GraphWidget(title=title, left=list(metrics), stacked=stacked, width=WIDTH)
