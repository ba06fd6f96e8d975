"""``AWS::SQS::Queue``: moto 5.2.5 rejects a FIFO queue without a name, cannot generate a valid name for
a standard one in a long stack, updates only two attributes in place (a property dropped from the
template keeps its value), and lacks the ``QueueUrl`` attribute."""

from __future__ import annotations

import json
from typing import Any

from moto.core.common_models import CloudFormationModel
from moto.sqs.constants import MAXIMUM_MESSAGE_LENGTH
from moto.sqs.models import Queue as MotoQueue
from moto.sqs.models import sqs_backends

from idempotent_local.cloudformation._common import Taught, adopt, as_bool, queue_name, tags

MAX_NAME_LENGTH = 80
FIFO_SUFFIX = ".fifo"


def generated_name(name: str, *, fifo: bool) -> str:
    """The name CloudFormation gives a queue without ``QueueName``: ``STACK-LOGICALID-SUFFIX`` cut to 80
    characters, keeping the random suffix, and ending in ``.fifo`` for a FIFO queue (moto generates the
    same pattern uncut, which SQS rejects past 80 characters, and never adds ``.fifo``)."""
    name = name.removesuffix(FIFO_SUFFIX)
    limit = MAX_NAME_LENGTH - (len(FIFO_SUFFIX) if fifo else 0)
    if len(name) > limit:
        head, dash, suffix = name.rpartition("-")
        name = (
            f"{head[: limit - len(suffix) - 1]}-{suffix}"
            if dash and len(suffix) < limit // 2
            else name[:limit]
        )
    return name + FIFO_SUFFIX if fifo else name


class SqsQueue(Taught, MotoQueue, CloudFormationModel):
    """``AWS::SQS::Queue``: a moto queue, named as CloudFormation names it, updated in place property by
    property (a property the template no longer sets goes back to SQS's default)."""

    # What SQS has for a property the template does not set; SqsManagedSseEnabled: on unless a KMS key is.
    DEFAULTS: dict[str, Any] = {
        "DelaySeconds": 0,
        "MaximumMessageSize": MAXIMUM_MESSAGE_LENGTH,
        "MessageRetentionPeriod": 345600,
        "ReceiveMessageWaitTimeSeconds": 0,
        "VisibilityTimeout": 30,
        "KmsMasterKeyId": None,
        "KmsDataKeyReusePeriodSeconds": 300,
        "ContentBasedDeduplication": False,
        "DeduplicationScope": "queue",
        "FifoThroughputLimit": "perQueue",
        "RedrivePolicy": "",
        "RedriveAllowPolicy": None,
    }
    TYPE, NAME = "AWS::SQS::Queue", "QueueName"
    GET_ATT = {"Arn": "queue_arn", "QueueName": "name", "QueueUrl": "physical_resource_id"}  # exactly AWS's

    @classmethod
    def create_resource(cls, name: str, props: dict[str, Any], account_id: str, region_name: str) -> SqsQueue:
        if "QueueName" not in props:
            name = generated_name(name, fifo=as_bool(props.get("FifoQueue")))
        queue = MotoQueue.create_from_cloudformation_json(
            name, {"Properties": props}, account_id, region_name
        )
        return adopt(queue, cls)

    @classmethod
    def update_resource(
        cls, resource: SqsQueue, props: dict[str, Any], account_id: str, region_name: str
    ) -> SqsQueue:
        attributes: dict[str, Any] = {}
        for key, default in cls.DEFAULTS.items():
            value = props.get(key, default)
            attributes[key] = json.dumps(value) if isinstance(value, dict) else value
        attributes["SqsManagedSseEnabled"] = as_bool(
            props.get("SqsManagedSseEnabled", not props.get("KmsMasterKeyId"))
        )
        # Moto's setter clears the policy unless it is passed along; it belongs to AWS::SQS::QueuePolicy.
        attributes["Policy"] = resource.policy
        resource._set_attributes(attributes)
        resource.tags = tags(props)
        return resource

    def delete(self, account_id: str, region_name: str) -> None:
        self.delete_resource(self.name, account_id, region_name)

    @classmethod
    def delete_resource(cls, name: str, account_id: str, region_name: str) -> None:
        sqs_backends[account_id][region_name].queues.pop(queue_name(name), None)
