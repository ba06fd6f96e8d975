"""``AWS::SQS::QueuePolicy``: moto 5.2.5 skips the type."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.sqs.models import sqs_backends

from idempotent_local.cloudformation._common import AttachedPolicy, queue_name


class SqsQueuePolicy(AttachedPolicy, CloudFormationModel):
    """``AWS::SQS::QueuePolicy``: sets the ``Policy`` attribute of every listed queue (a queue it leaves,
    if it still exists, is left without one)."""

    TYPE = "AWS::SQS::QueuePolicy"
    TARGETS = "Queues"

    @classmethod
    def attach(cls, targets: list[str], document: dict[str, Any], account_id: str, region_name: str) -> None:
        backend = sqs_backends[account_id][region_name]
        for url in targets:
            backend.get_queue(queue_name(url)).policy = json.dumps(document)

    @classmethod
    def detach(cls, targets: list[str], account_id: str, region_name: str) -> None:
        backend = sqs_backends[account_id][region_name]
        for url in targets:
            queue = backend.queues.get(queue_name(url))
            if queue is not None:
                queue.policy = ""
