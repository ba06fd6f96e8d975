"""Which queues: from a stack (every consumer among its resources, named by its outputs), or from the URLs
given on the command line.

A consumer is a function with the runtime's handler (or an environment with TABLE_NAME and
IDEMPOTENCY_MODE) fed by an SQS event source mapping; a stack may hold several (the reference app with
``-c outbox=true`` holds three). Each has its own queues and table:

- the source queue: the mapping's event source;
- the DLQ: the function's ``DLQ_URL``, else the source queue's ``RedrivePolicy``;
- the subscription DLQ: the ``RedrivePolicy`` of the SNS subscription that delivers to the source queue;
- the table and the key configuration: its environment (``Config.from_env``), what ``--dry-run``,
  ``--force`` and ``trace`` read.

The stack's outputs name consumers. An output whose value is a consumer's function name (or ARN) is one of
its names (``FunctionName``, ``PaymentsFunctionName``), and the outputs of the same prefix name its queues
(``QueueUrl``, ``DeadLetterQueueUrl``, ``SubscriptionDeadLetterQueueUrl``; ``Payments...``). The consumer
the unprefixed outputs name is the stack's main one. Outputs naming a DLQ whose consumer is not among the
stack's resources (a function of another stack) are a consumer of their own, as far as they name it.

An outbox relay (the relay's handler, fed by the table's DynamoDB stream) is found beside the consumers: not
a consumer, but a hop with its function, its DLQ, its target and the stream (table) it reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from botocore.exceptions import ClientError
from idempotent_runtime import contract
from idempotent_runtime.relay import RELAY_HANDLER

from idempotent_cli.dlq.aws import Clients
from idempotent_cli.dlq.errors import DlqError
from idempotent_cli.dlq.letters import Which

# CloudFormation outputs of the reference stack (and of any stack that names them the same way): a prefix
# (none for the stack's main consumer, "Payments" for another) and one of these suffixes.
OUTPUT_QUEUE = "QueueUrl"
OUTPUT_DLQ = "DeadLetterQueueUrl"
OUTPUT_SUBSCRIPTION_DLQ = "SubscriptionDeadLetterQueueUrl"
OUTPUT_FUNCTION = "FunctionName"
# Longest first: "DeadLetterQueueUrl" also ends in "QueueUrl".
OUTPUT_SUFFIXES = (OUTPUT_SUBSCRIPTION_DLQ, OUTPUT_DLQ, OUTPUT_FUNCTION, OUTPUT_QUEUE)
BOOTSTRAP_STACK = "CDKToolkit"
GONE = ("DELETE_COMPLETE", "DELETE_IN_PROGRESS")
FUNCTION_TYPE = "AWS::Lambda::Function"


def _answers(name: str, function: str | None, names: tuple[str, ...]) -> bool:
    """Whether ``name`` is the function's name, its ARN (qualified or not), or one of its other names."""
    if function is None:
        return name in names
    arn = name.split(":")
    return name == function or name in names or (name.startswith("arn:") and arn[6:7] == [function])


@dataclass(frozen=True)
class Pipeline:
    """One consumer and its queues, as found in a stack (or from URLs)."""

    stack: str | None
    function: str | None
    environment: Mapping[str, str] | None
    queue_url: str | None
    dead_letter_queue_url: str | None
    subscription_dead_letter_queue_url: str | None = None
    outputs: tuple[str, ...] = ()  # the stack's outputs naming it ("FunctionName", "PaymentsFunctionName")
    logical_id: str | None = None  # the function's, in the stack
    main: bool = False  # the stack's unprefixed outputs name it

    @property
    def label(self) -> str:
        return f"{self.stack or '?'}/{self.function or '?'}"

    def answers_to(self, name: str) -> bool:
        """Whether ``--function NAME`` names this consumer: its function's name or ARN, an output naming it,
        its logical id."""
        return _answers(name, self.function, (*self.outputs, *filter(None, [self.logical_id])))

    def describe(self) -> str:
        """The function and the outputs naming it, for lists: ``Orders-Fn-1 (FunctionName)``."""
        return f"{self.function or '?'}" + (f" ({', '.join(self.outputs)})" if self.outputs else "")


@dataclass(frozen=True)
class Relay:
    """An outbox relay (OutboxRelay): the function on a table's stream that publishes what a consumer
    emitted to its target. Not a consumer; its DLQ holds what the target refused, and the batches Lambda
    gave up on."""

    stack: str
    function: str
    environment: Mapping[str, str]
    stream_arn: str | None  # its DynamoDB stream event source: the table it reads
    outputs: tuple[str, ...] = ()
    logical_id: str | None = None

    @property
    def label(self) -> str:
        return f"{self.stack}/{self.function}"

    @property
    def dead_letter_queue_url(self) -> str | None:
        return self.environment.get(contract.DLQ_URL.name) or None

    @property
    def target_arn(self) -> str | None:
        return self.environment.get(contract.EMIT_TARGET_ARN.name) or None

    @property
    def table_name(self) -> str | None:
        """The table whose stream it reads (``arn:...:table/NAME/stream/LABEL``)."""
        if not self.stream_arn or ":table/" not in self.stream_arn:
            return None
        return self.stream_arn.split(":table/", 1)[1].split("/stream/", 1)[0]

    def answers_to(self, name: str) -> bool:
        return _answers(name, self.function, (*self.outputs, *filter(None, [self.logical_id])))

    def relays_for(self, pipeline: Pipeline) -> bool:
        """Whether it publishes what ``pipeline`` emits: the consumer's table and emit target."""
        environment = pipeline.environment or {}
        return (
            self.table_name is not None
            and environment.get(contract.TABLE_NAME.name) == self.table_name
            and environment.get(contract.EMIT_TARGET_ARN.name) == self.target_arn
        )


@dataclass(frozen=True)
class Deployed:
    """One stack as the tools see it: its consumers (the main one first) and its relays."""

    name: str
    pipelines: tuple[Pipeline, ...]
    relays: tuple[Relay, ...] = ()


class Use(Enum):
    """What a command does, which decides what it does on a stack of several consumers without --function."""

    LOOK = "look"  # reads: the stack's main consumer (else its first), and says so with the list
    CHANGE = "change"  # changes things: stops and lists them (it never guesses)


@dataclass(frozen=True)
class Target:
    """The dead-letter queue a command works on, and where its messages go back to."""

    which: Which
    dlq_url: str
    source_url: str | None
    pipeline: Pipeline
    max_receive_count: int | None  # the source queue's, for messages SQS moved
    note: str | None = None  # which consumer of several this is, when --function did not say

    @property
    def environment(self) -> Mapping[str, str] | None:
        return self.pipeline.environment

    @property
    def key_source(self) -> str | None:
        if self.environment is None:
            return None
        return self.environment.get(contract.KEY_SOURCE.name) or contract.KEY_SOURCE.default


def listing(pipelines: tuple[Pipeline, ...] | list[Pipeline]) -> str:
    return ", ".join(pipeline.describe() for pipeline in pipelines)


def resolve(
    clients: Clients,
    *,
    which: Which = Which.DLQ,
    stack: str | None = None,
    function: str | None = None,
    queue_url: str | None = None,
    source_queue_url: str | None = None,
    use: Use = Use.LOOK,
) -> Target:
    """Find the target from ``--queue-url`` (and friends) or from a stack: the consumer ``function`` names,
    else the only one, else as ``use`` says (see :func:`choose`)."""
    note = None
    if queue_url:
        if stack and function:  # any name the stack gives the function
            function = choose(clients, stack=stack, function=function, use=use)[0].function
        pipeline = _from_urls(clients, which, queue_url, source_queue_url, function)
    else:
        pipeline, note = choose(clients, stack=stack, function=function, use=use)
        if source_queue_url:
            pipeline = replace(pipeline, queue_url=source_queue_url)
    return replace(target_of(clients, pipeline, which), note=note)


def target_of(clients: Clients, pipeline: Pipeline, which: Which = Which.DLQ) -> Target:
    """The DLQ of ``pipeline`` (``which`` one), checked to exist, with its source queue's maxReceiveCount."""
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


def choose(
    clients: Clients, *, stack: str | None, function: str | None, use: Use
) -> tuple[Pipeline, str | None]:
    """The consumer ``function`` names (any of its names), else the only one deployed (in ``stack``), else,
    for :attr:`Use.LOOK`, the stack's main consumer (else its first) with a note naming the others; otherwise
    an error naming them all."""
    found = one_stack(candidates(clients, stack=stack, function=function))
    if len(found) == 1:
        return found[0], None
    name = found[0].stack
    if use is Use.CHANGE:
        raise DlqError(
            f"stack {name} has {len(found)} consumers: {listing(found)}; this command changes things: "
            "name the consumer with --function NAME (its function name or an output naming it)"
        )
    chosen = found[0]
    main = " (the one the stack's unprefixed outputs name)" if chosen.main else ""
    return chosen, (
        f"stack {name} has {len(found)} consumers: {listing(found)}; this is {chosen.function}{main}: "
        "--function NAME chooses another"
    )


def one_stack(pipelines: list[Pipeline]) -> list[Pipeline]:
    """``pipelines``, if they are the consumers of one stack; else an error naming them."""
    if len({pipeline.stack for pipeline in pipelines}) > 1:
        names = ", ".join(p.label for p in pipelines)
        choose_with = "--stack NAME (and --function NAME if a stack has several)"
        raise DlqError(f"{len(pipelines)} pipelines are deployed ({names}): choose one with {choose_with}")
    return pipelines


def candidates(clients: Clients, *, stack: str | None, function: str | None) -> list[Pipeline]:
    """The consumers ``function`` names (any of its names), else every consumer deployed (in ``stack``):
    the main one of each stack first. Raises DlqError, naming what there is, when none is."""
    stacks = deployed(clients, stack)
    pipelines = [p for s in stacks for p in s.pipelines]
    if not pipelines:
        if stack:
            raise DlqError(
                f"stack {stack} has no pipeline: no {OUTPUT_DLQ} output, and no function with the runtime's "
                f"handler ({contract.HANDLER}) fed by an SQS queue; pass --queue-url to name a queue"
            )
        raise DlqError(
            f"no pipeline is deployed in {clients.where}: no stack has a {OUTPUT_DLQ} output or a "
            f"function with the runtime's handler fed by an SQS queue; pass --stack or --queue-url"
        )
    if not function:
        return pipelines
    chosen = [p for p in pipelines if p.answers_to(function)]
    if chosen:
        return chosen
    relays = [r for s in stacks for r in s.relays if r.answers_to(function)]
    if relays:
        raise DlqError(_not_a_consumer(relays[0], [p for p in pipelines if relays[0].relays_for(p)]))
    raise DlqError(
        f"no pipeline with function {function}"
        + (f" in stack {stack}" if stack else "")
        + " (a function name or ARN, a stack output naming it, or its logical id); consumers: "
        + ", ".join(f"{p.stack}/{p.describe()}" for p in pipelines)
    )


def relay_named(clients: Clients, *, stack: str | None, function: str) -> Relay | None:
    """The outbox relay ``function`` names (any of its names) among the deployed stacks (``stack``), or None
    when it names none (a consumer, or nothing)."""
    found = [r for s in deployed(clients, stack) for r in s.relays if r.answers_to(function)]
    if len({r.label for r in found}) > 1:
        raise DlqError(
            f"{function} names {len(found)} relays ({', '.join(r.label for r in found)}): choose with --stack"
        )
    return found[0] if found else None


def _not_a_consumer(relay: Relay, relayed: list[Pipeline]) -> str:
    of = f" of {relayed[0].label}" if len(relayed) == 1 else ""
    dlq = relay.dead_letter_queue_url
    return (
        f"{relay.label} is the outbox relay{of} (it publishes to {relay.target_arn or '?'}), not a consumer"
        + (
            f": `dlq list|show|redrive --function {relay.function}` read its dead-letter queue and "
            f"publish what it stands for again; purge it with --queue-url {dlq}"
            if dlq
            else ""
        )
    )


def deployed(clients: Clients, stack: str | None = None) -> list[Deployed]:
    """The stack named (an error naming the deployed ones if there is none), or every deployed stack."""
    if stack:
        return [discover(clients, _describe_stack(clients, stack))]
    return [discover(clients, description) for description in _stacks(clients)]


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


def discover(clients: Clients, stack: Mapping[str, Any]) -> Deployed:
    """Every consumer and relay among the stack's functions, named and completed by its outputs."""
    name = stack["StackName"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
    pipelines: list[Pipeline] = []
    relays: list[Relay] = []
    paginator = clients("cloudformation").get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=name):
        for resource in page["StackResourceSummaries"]:
            if resource["ResourceType"] != FUNCTION_TYPE or not resource.get("PhysicalResourceId"):
                continue
            found = _function(clients, name, resource["PhysicalResourceId"], outputs)
            found = [replace(f, logical_id=resource["LogicalResourceId"]) for f in found]
            pipelines += [f for f in found if isinstance(f, Pipeline)]
            relays += [f for f in found if isinstance(f, Relay)]
    pipelines = _named_by_outputs(clients, name, pipelines, outputs)
    return Deployed(name=name, pipelines=tuple(pipelines), relays=tuple(relays))


def _function(
    clients: Clients, stack: str, function: str, outputs: Mapping[str, str]
) -> list[Pipeline | Relay]:
    """The consumer (one per SQS queue it is fed by) or the relay ``function`` is, or nothing."""
    configuration = clients("lambda").get_function_configuration(FunctionName=function)
    environment = dict((configuration.get("Environment") or {}).get("Variables") or {})
    handler = configuration.get("Handler")
    arn = configuration.get("FunctionArn")
    names = tuple(key for key, value in outputs.items() if value in (function, arn))
    if _is_consumer(handler, environment):
        return [
            Pipeline(
                stack=stack,
                function=function,
                environment=environment,
                queue_url=queue_url,
                dead_letter_queue_url=environment.get(contract.DLQ_URL.name) or _dlq_of(clients, queue_url),
                outputs=names,
            )
            for queue_url in _mapped_queues(clients, function)
        ]
    if _is_relay(handler, environment):
        streams = _mapped(clients, function, "dynamodb")
        return [Relay(stack, function, environment, streams[0] if streams else None, outputs=names)]
    return []


def _named_by_outputs(
    clients: Clients, stack: str, pipelines: list[Pipeline], outputs: Mapping[str, str]
) -> list[Pipeline]:
    """The consumers completed by the outputs of their prefix (their queues, where the outputs name them),
    plus those whose DLQ the outputs name that are not among the resources; in :func:`_order`."""
    groups: dict[str, dict[str, str]] = {}
    for key, value in outputs.items():
        suffix = next((s for s in OUTPUT_SUFFIXES if key.endswith(s)), None)
        if suffix is not None:
            groups.setdefault(key[: -len(suffix)], {})[suffix] = value
    for prefix, group in groups.items():
        index = next((n for n, p in enumerate(pipelines) if _named_by(p, group)), None)
        if index is None and group.get(OUTPUT_DLQ):
            function = group.get(OUTPUT_FUNCTION)
            pipelines.append(
                Pipeline(
                    stack=stack,
                    function=function,
                    environment=_environment(clients, function) if function else None,
                    queue_url=None,
                    dead_letter_queue_url=None,
                    outputs=tuple(k for k, v in outputs.items() if function and v == function),
                )
            )
            index = len(pipelines) - 1
        if index is None:
            continue
        pipeline = pipelines[index]
        pipelines[index] = replace(
            pipeline,
            queue_url=group.get(OUTPUT_QUEUE) or pipeline.queue_url,
            dead_letter_queue_url=group.get(OUTPUT_DLQ) or pipeline.dead_letter_queue_url,
            subscription_dead_letter_queue_url=group.get(OUTPUT_SUBSCRIPTION_DLQ)
            or pipeline.subscription_dead_letter_queue_url,
            main=pipeline.main or prefix == "",
        )
    return sorted(pipelines, key=_order)


def _order(pipeline: Pipeline) -> tuple[bool, bool, str]:
    """The main consumer first, then those outputs name (by output), then the others (by logical id)."""
    named = sorted(pipeline.outputs)
    return (
        not pipeline.main,
        not named,
        named[0] if named else pipeline.logical_id or pipeline.function or "",
    )


def _named_by(pipeline: Pipeline, group: Mapping[str, str]) -> bool:
    """Whether a prefix's outputs name ``pipeline``: its function, or its source queue."""
    function, queue = group.get(OUTPUT_FUNCTION), group.get(OUTPUT_QUEUE)
    if function:
        return pipeline.answers_to(function)
    return bool(queue and pipeline.queue_url and same_queue(queue, pipeline.queue_url))


def same_queue(one: str, other: str) -> bool:
    """Whether two URLs name one queue: its account and name (endpoints write the host differently)."""
    return one.split("/")[-2:] == other.split("/")[-2:]


def _is_consumer(handler: str | None, environment: Mapping[str, str]) -> bool:
    return handler == contract.HANDLER or {
        contract.TABLE_NAME.name,
        contract.IDEMPOTENCY_MODE.name,
    } <= set(environment)


def _is_relay(handler: str | None, environment: Mapping[str, str]) -> bool:
    return handler == RELAY_HANDLER or (
        contract.EMIT_TARGET_ARN.name in environment and contract.TABLE_NAME.name not in environment
    )


# -- lookups --------------------------------------------------------------------------------------------


def _environment(clients: Clients, function: str) -> dict[str, str]:
    try:
        configuration = clients("lambda").get_function_configuration(FunctionName=function)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise DlqError(f"no function {function} in {clients.where}") from None
        raise
    return dict((configuration.get("Environment") or {}).get("Variables") or {})


def _mapped(clients: Clients, function: str, service: str) -> list[str]:
    """The ARNs of the ``service`` event sources (``sqs``, ``dynamodb``: a table's stream) that feed
    ``function`` (its event source mappings)."""
    arns = []
    paginator = clients("lambda").get_paginator("list_event_source_mappings")
    for page in paginator.paginate(FunctionName=function):
        for mapping in page["EventSourceMappings"]:
            arn = mapping.get("EventSourceArn", "")
            if arn.startswith("arn:") and arn.split(":")[2] == service:
                arns.append(arn)
    return arns


def _mapped_queues(clients: Clients, function: str) -> list[str]:
    """The SQS queues that feed ``function``."""
    return [queue_url_of(clients, arn) for arn in _mapped(clients, function, "sqs")]


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
