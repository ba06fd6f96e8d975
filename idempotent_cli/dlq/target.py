"""The dead-letter queue a command works on: a pipeline's (the queue's, or its SNS subscription's), checked to
exist, and the source queue its messages go back to."""

from __future__ import annotations

import json
from dataclasses import dataclass

from idempotent_runtime import contract

from idempotent_cli.aws import Clients
from idempotent_cli.dlq.letters import Which
from idempotent_cli.errors import DlqError
from idempotent_cli.stack import Pipeline, check_queue, queue_url_of, redrive_policy, subscriptions


@dataclass(frozen=True)
class Target:
    """The dead-letter queue a command works on, and where its messages go back to."""

    which: Which
    dlq_url: str
    source_url: str | None
    pipeline: Pipeline
    max_receive_count: int | None  # the source queue's, for messages SQS moved

    @property
    def key_source(self) -> str | None:
        environment = self.pipeline.environment
        if environment is None:
            return None
        return environment.get(contract.KEY_SOURCE.name) or contract.KEY_SOURCE.default


def target_of(clients: Clients, pipeline: Pipeline, which: Which = Which.DLQ) -> Target:
    """The DLQ of ``pipeline`` (``which`` one), checked to exist, with its source queue's maxReceiveCount."""
    queue = pipeline.queue_url
    if which is Which.SUBSCRIPTION:
        dlq = subscription_dlq(clients, pipeline)
        missing = (
            f": the SNS subscription of {queue or 'its queue'} has no dead-letter queue (no RedrivePolicy)"
        )
    else:
        dlq = pipeline.dead_letter_queue_url
        missing = " has no dead-letter queue: its function has no DLQ_URL and "
        missing += f"{queue or 'its queue'} no RedrivePolicy"
    if not dlq:
        raise DlqError(f"pipeline {pipeline.label}{missing}; pass --queue-url to name one")
    check_queue(clients, dlq, "dead-letter queue")
    if queue:
        check_queue(clients, queue, "source queue")
    policy = redrive_policy(clients, queue) if queue and which is Which.DLQ else {}
    count = policy.get("maxReceiveCount") or (pipeline.environment or {}).get(contract.MAX_RECEIVE_COUNT.name)
    return Target(which, dlq, queue, pipeline, int(count) if count else None)


def subscription_dlq(clients: Clients, pipeline: Pipeline) -> str | None:
    """The pipeline's SNS subscription DLQ: its stack's output, else the DLQ in the redrive policy of the
    subscription(s) delivering to its queue."""
    queue_url = pipeline.queue_url
    if pipeline.subscription_dead_letter_queue_url or not queue_url:
        return pipeline.subscription_dead_letter_queue_url
    found = set()
    for subscription in subscriptions(clients, queue_url):
        attributes = clients("sns").get_subscription_attributes(
            SubscriptionArn=subscription["SubscriptionArn"]
        )
        policy = attributes.get("Attributes", {}).get("RedrivePolicy")
        if policy:
            found.add(json.loads(policy)["deadLetterTargetArn"])
    if len(found) > 1:
        raise DlqError(
            f"the subscriptions delivering to {queue_url} have {len(found)} different dead-letter queues "
            f"({', '.join(sorted(found))}): name one with --queue-url"
        )
    return queue_url_of(clients, found.pop()) if found else None
