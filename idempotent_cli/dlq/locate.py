"""Which queues: from a stack's outputs, from its resources, or from the URLs given on the command line.

A pipeline is a consumer function (the runtime's handler, or an environment with TABLE_NAME and
IDEMPOTENCY_MODE) fed by an SQS event source mapping. Its queues:

- the source queue: the mapping's event source (stack output ``QueueUrl``);
- the DLQ: the function's ``DLQ_URL``, else the source queue's ``RedrivePolicy`` (output
  ``DeadLetterQueueUrl``);
- the subscription DLQ: the ``RedrivePolicy`` of the SNS subscription that delivers to the source queue
  (output ``SubscriptionDeadLetterQueueUrl``).

The consumer's environment also gives what ``--dry-run`` and ``--force`` need: the table and the key
configuration (``Config.from_env``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError
from idempotent_runtime import contract

from idempotent_cli.dlq.aws import Clients
from idempotent_cli.dlq.errors import DlqError
from idempotent_cli.dlq.letters import Which

# CloudFormation outputs of the reference stack (and of any stack that names them the same way).
OUTPUT_QUEUE = "QueueUrl"
OUTPUT_DLQ = "DeadLetterQueueUrl"
OUTPUT_SUBSCRIPTION_DLQ = "SubscriptionDeadLetterQueueUrl"
OUTPUT_FUNCTION = "FunctionName"
BOOTSTRAP_STACK = "CDKToolkit"
GONE = ("DELETE_COMPLETE", "DELETE_IN_PROGRESS")


@dataclass(frozen=True)
class Pipeline:
    """One consumer and its queues, as found in a stack (or from URLs)."""

    stack: str | None
    function: str | None
    environment: Mapping[str, str] | None
    queue_url: str | None
    dead_letter_queue_url: str | None
    subscription_dead_letter_queue_url: str | None = None

    @property
    def label(self) -> str:
        return f"{self.stack or '?'}/{self.function or '?'}"


@dataclass(frozen=True)
class Target:
    """The dead-letter queue a command works on, and where its messages go back to."""

    which: Which
    dlq_url: str
    source_url: str | None
    pipeline: Pipeline
    max_receive_count: int | None  # the source queue's, for messages SQS moved

    @property
    def environment(self) -> Mapping[str, str] | None:
        return self.pipeline.environment

    @property
    def key_source(self) -> str | None:
        if self.environment is None:
            return None
        return self.environment.get(contract.KEY_SOURCE.name) or contract.KEY_SOURCE.default


def resolve(
    clients: Clients,
    *,
    which: Which = Which.DLQ,
    stack: str | None = None,
    function: str | None = None,
    queue_url: str | None = None,
    source_queue_url: str | None = None,
) -> Target:
    """Find the target from ``--queue-url`` (and friends) or from a stack (the only pipeline if none is
    named)."""
    if queue_url:
        pipeline = _from_urls(clients, which, queue_url, source_queue_url, function)
    else:
        pipeline = _from_stack(clients, stack, function)
        if source_queue_url:
            pipeline = _replace(pipeline, queue_url=source_queue_url)
    if which is Which.SUBSCRIPTION:
        dlq = pipeline.subscription_dead_letter_queue_url or (
            subscription_dlq(clients, pipeline.queue_url) if pipeline.queue_url else None
        )
        if not dlq:
            raise DlqError(
                f"pipeline {pipeline.label}: the SNS subscription of {pipeline.queue_url or 'its queue'} has "
                "no dead-letter queue (no RedrivePolicy); pass --queue-url to name one"
            )
    else:
        dlq = pipeline.dead_letter_queue_url
        if not dlq:
            raise DlqError(
                f"pipeline {pipeline.label} has no dead-letter queue: its function has no DLQ_URL and "
                f"{pipeline.queue_url or 'its queue'} no RedrivePolicy; pass --queue-url to name one"
            )
    _check_queue(clients, dlq, "dead-letter queue")
    if pipeline.queue_url:
        _check_queue(clients, pipeline.queue_url, "source queue")
    max_receive_count = None
    if pipeline.queue_url and which is Which.DLQ:
        max_receive_count = _redrive_policy(clients, pipeline.queue_url).get("maxReceiveCount")
    if max_receive_count is None and pipeline.environment:
        max_receive_count = pipeline.environment.get(contract.MAX_RECEIVE_COUNT.name) or None
    return Target(
        which=which,
        dlq_url=dlq,
        source_url=pipeline.queue_url,
        pipeline=pipeline,
        max_receive_count=int(max_receive_count) if max_receive_count else None,
    )


# -- from URLs ------------------------------------------------------------------------------------------


def _from_urls(
    clients: Clients, which: Which, dlq_url: str, source_url: str | None, function: str | None
) -> Pipeline:
    _check_queue(clients, dlq_url, "dead-letter queue")
    environment = _environment(clients, function) if function else None
    if source_url is None and function:
        sources = _mapped_queues(clients, function)
        source_url = sources[0] if len(sources) == 1 else None
    if source_url is None and which is Which.DLQ:
        sources = clients("sqs").list_dead_letter_source_queues(QueueUrl=dlq_url).get("queueUrls", [])
        if len(sources) > 1:
            raise DlqError(
                f"{dlq_url} is the dead-letter queue of {len(sources)} queues ({', '.join(sources)}): "
                "name the one to redrive to with --source-queue-url"
            )
        source_url = sources[0] if sources else None
    if function is None and source_url:
        consumers = _consumers_of(clients, source_url)
        if len(consumers) == 1:
            function = consumers[0]
            environment = _environment(clients, function)
    return Pipeline(
        stack=None,
        function=function,
        environment=environment,
        queue_url=source_url,
        dead_letter_queue_url=dlq_url if which is Which.DLQ else None,
        subscription_dead_letter_queue_url=dlq_url if which is Which.SUBSCRIPTION else None,
    )


# -- from stacks ----------------------------------------------------------------------------------------


def _from_stack(clients: Clients, stack: str | None, function: str | None) -> Pipeline:
    if stack:
        pipelines = pipelines_in_stack(clients, _describe_stack(clients, stack))
        if not pipelines:
            raise DlqError(
                f"stack {stack} has no pipeline: no {OUTPUT_DLQ} output, and no function with the runtime's "
                f"handler ({contract.HANDLER}) fed by an SQS queue; pass --queue-url to name a queue"
            )
    else:
        pipelines = [p for s in _stacks(clients) for p in pipelines_in_stack(clients, s)]
        if not pipelines:
            raise DlqError(
                f"no pipeline is deployed in {clients.where}: no stack has a {OUTPUT_DLQ} output or a "
                f"function with the runtime's handler fed by an SQS queue; pass --stack or --queue-url"
            )
    if function:
        chosen = [p for p in pipelines if p.function == function]
        if not chosen:
            raise DlqError(
                f"no pipeline with function {function}"
                + (f" in stack {stack}" if stack else "")
                + f"; pipelines: {', '.join(p.label for p in pipelines)}"
            )
        pipelines = chosen
    if len(pipelines) > 1:
        names = ", ".join(p.label for p in pipelines)
        choose = "--function NAME" if stack else "--stack NAME (and --function NAME if a stack has several)"
        raise DlqError(f"{len(pipelines)} pipelines are deployed ({names}): choose one with {choose}")
    return pipelines[0]


def _describe_stack(clients: Clients, name: str) -> dict[str, Any]:
    try:
        stacks = clients("cloudformation").describe_stacks(StackName=name)["Stacks"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ValidationError":
            raise
        known = [s["StackName"] for s in _stacks(clients, include_bootstrap=False)]
        raise DlqError(
            f"unknown stack {name} in {clients.where}"
            + (f"; deployed stacks: {', '.join(known)}" if known else "; no stack is deployed there")
        ) from None
    live = [s for s in stacks if s["StackStatus"] not in GONE]
    if not live:
        raise DlqError(f"stack {name} is deleted ({stacks[0]['StackStatus']})")
    return live[0]


def _stacks(clients: Clients, include_bootstrap: bool = False) -> Iterator[dict[str, Any]]:
    for page in clients("cloudformation").get_paginator("describe_stacks").paginate():
        for stack in page["Stacks"]:
            if stack["StackStatus"] in GONE or (
                stack["StackName"] == BOOTSTRAP_STACK and not include_bootstrap
            ):
                continue
            yield stack


def pipelines_in_stack(clients: Clients, stack: Mapping[str, Any]) -> list[Pipeline]:
    """The stack's pipeline from its outputs when it has them, else every consumer among its resources."""
    name = stack["StackName"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
    if outputs.get(OUTPUT_DLQ):
        function = outputs.get(OUTPUT_FUNCTION)
        return [
            Pipeline(
                stack=name,
                function=function,
                environment=_environment(clients, function) if function else None,
                queue_url=outputs.get(OUTPUT_QUEUE),
                dead_letter_queue_url=outputs[OUTPUT_DLQ],
                subscription_dead_letter_queue_url=outputs.get(OUTPUT_SUBSCRIPTION_DLQ),
            )
        ]
    pipelines = []
    paginator = clients("cloudformation").get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=name):
        for resource in page["StackResourceSummaries"]:
            if resource["ResourceType"] != "AWS::Lambda::Function" or not resource.get("PhysicalResourceId"):
                continue
            function = resource["PhysicalResourceId"]
            configuration = clients("lambda").get_function_configuration(FunctionName=function)
            environment = (configuration.get("Environment") or {}).get("Variables") or {}
            if not _is_consumer(configuration.get("Handler"), environment):
                continue
            for queue_url in _mapped_queues(clients, function):
                dlq = environment.get(contract.DLQ_URL.name) or _dlq_of(clients, queue_url)
                pipelines.append(
                    Pipeline(
                        stack=name,
                        function=function,
                        environment=environment,
                        queue_url=queue_url,
                        dead_letter_queue_url=dlq,
                    )
                )
    return pipelines


def _is_consumer(handler: str | None, environment: Mapping[str, str]) -> bool:
    return handler == contract.HANDLER or {
        contract.TABLE_NAME.name,
        contract.IDEMPOTENCY_MODE.name,
    } <= set(environment)


# -- lookups --------------------------------------------------------------------------------------------


def _environment(clients: Clients, function: str) -> dict[str, str]:
    try:
        configuration = clients("lambda").get_function_configuration(FunctionName=function)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise DlqError(f"no function {function} in {clients.where}") from None
        raise
    return dict((configuration.get("Environment") or {}).get("Variables") or {})


def _mapped_queues(clients: Clients, function: str) -> list[str]:
    """The SQS queues that feed ``function`` (its event source mappings)."""
    urls = []
    paginator = clients("lambda").get_paginator("list_event_source_mappings")
    for page in paginator.paginate(FunctionName=function):
        for mapping in page["EventSourceMappings"]:
            arn = mapping.get("EventSourceArn", "")
            if arn.startswith("arn:") and arn.split(":")[2] == "sqs":
                urls.append(queue_url_of(clients, arn))
    return urls


def _consumers_of(clients: Clients, queue_url: str) -> list[str]:
    arn = queue_arn_of(clients, queue_url)
    functions = []
    paginator = clients("lambda").get_paginator("list_event_source_mappings")
    for page in paginator.paginate(EventSourceArn=arn):
        for mapping in page["EventSourceMappings"]:
            function = mapping["FunctionArn"].split(":")[6]
            configuration = clients("lambda").get_function_configuration(FunctionName=function)
            environment = (configuration.get("Environment") or {}).get("Variables") or {}
            if _is_consumer(configuration.get("Handler"), environment):
                functions.append(function)
    return functions


def _redrive_policy(clients: Clients, queue_url: str) -> dict[str, Any]:
    attributes = clients("sqs").get_queue_attributes(QueueUrl=queue_url, AttributeNames=["RedrivePolicy"])
    policy = attributes.get("Attributes", {}).get("RedrivePolicy")
    return json.loads(policy) if policy else {}


def _dlq_of(clients: Clients, queue_url: str) -> str | None:
    target = _redrive_policy(clients, queue_url).get("deadLetterTargetArn")
    return queue_url_of(clients, target) if target else None


def subscription_dlq(clients: Clients, queue_url: str) -> str | None:
    """The DLQ in the redrive policy of the SNS subscription(s) delivering to ``queue_url``."""
    arn = queue_arn_of(clients, queue_url)
    sns = clients("sns")
    found = set()
    for page in sns.get_paginator("list_subscriptions").paginate():
        for subscription in page["Subscriptions"]:
            if subscription.get("Protocol") != "sqs" or subscription.get("Endpoint") != arn:
                continue
            attributes = sns.get_subscription_attributes(SubscriptionArn=subscription["SubscriptionArn"])
            policy = attributes.get("Attributes", {}).get("RedrivePolicy")
            if policy:
                found.add(json.loads(policy)["deadLetterTargetArn"])
    if len(found) > 1:
        raise DlqError(
            f"the subscriptions delivering to {queue_url} have {len(found)} different dead-letter queues "
            f"({', '.join(sorted(found))}): name one with --queue-url"
        )
    return queue_url_of(clients, found.pop()) if found else None


def queue_url_of(clients: Clients, arn: str) -> str:
    parts = arn.split(":")
    return clients("sqs").get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]


def queue_arn_of(clients: Clients, url: str) -> str:
    attributes = clients("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return attributes["Attributes"]["QueueArn"]


def _check_queue(clients: Clients, url: str, role: str) -> None:
    try:
        clients("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if "NonExistentQueue" in code or "QueueDoesNotExist" in code:
            raise DlqError(f"the {role} {url} does not exist in {clients.where}") from None
        raise


def _replace(pipeline: Pipeline, **changes: Any) -> Pipeline:
    from dataclasses import replace

    return replace(pipeline, **changes)
