"""PipelineDashboard: one CloudWatch dashboard with what an operator of a pipeline looks at first."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct
from idempotent_runtime.contract import Mode

from idempotent_pipeline._alarms import ONE_MINUTE
from idempotent_pipeline.consumer import IdempotentConsumer
from idempotent_pipeline.messaging import Messaging
from idempotent_pipeline.table import IdempotencyTable

WIDTH = 8  # three graphs per row of 24 units


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
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Records by outcome (per minute)",
                left=[
                    consumer.metric_processed(label="processed"),
                    consumer.metric_duplicates(label="duplicates"),
                    *([consumer.metric_stale(label="stale")] if consumer.mode == Mode.VERSIONED else []),
                    consumer.metric_quarantined(label="quarantined"),
                    consumer.metric_failed(label="failed"),
                ],
                stacked=True,
                width=WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Duplicate rate (%)", left=[consumer.metric_duplicate_rate()], width=WIDTH
            ),
            cloudwatch.GraphWidget(
                title="Conflicts and misconfiguration",
                left=[
                    consumer.metric_conflicts(label="conflicts"),
                    consumer.metric_misconfigured(label="misconfigured"),
                ],
                width=WIDTH,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Dead-letter queues (visible messages)",
                left=[
                    queue.metric_approximate_number_of_messages_visible(
                        period=ONE_MINUTE, statistic="Maximum", label=label
                    )
                    for label, queue in queues
                    if queue is not None
                ],
                width=WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Oldest message in the queue (seconds)",
                left=[
                    consumer.queue.metric_approximate_age_of_oldest_message(
                        period=ONE_MINUTE, statistic="Maximum", label="age"
                    )
                ],
                width=WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="DynamoDB write throttles",
                left=[
                    table.table.metric(
                        "WriteThrottleEvents", period=ONE_MINUTE, statistic="Sum", label="write throttles"
                    )
                ],
                width=WIDTH,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Function duration (ms)",
                left=[
                    function.metric_duration(period=ONE_MINUTE, statistic="Average", label="average"),
                    function.metric_duration(period=ONE_MINUTE, statistic="p99", label="p99"),
                ],
                width=WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Function concurrency and throttles",
                left=[
                    function.metric(
                        "ConcurrentExecutions", period=ONE_MINUTE, statistic="Maximum", label="concurrent"
                    ),
                    function.metric_throttles(period=ONE_MINUTE, statistic="Sum", label="throttles"),
                ],
                width=WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Invocation errors",
                left=[function.metric_errors(period=ONE_MINUTE, statistic="Sum", label="errors")],
                width=WIDTH,
            ),
        )
