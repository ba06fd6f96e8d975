"""What is deployed: the functions of a stack, its pipelines among them, and how a command chooses.

A stack is read once per command: its resources (ListStackResources, not cut at 100 as DescribeStackResources
is), their construct paths (the ``aws:cdk:path`` metadata the CDK CLI writes into the template: GetTemplate),
its outputs, each function's configuration and event source mappings. Each function is a :class:`Function`;
a consumer (the runtime's handler, or TABLE_NAME and IDEMPOTENCY_MODE in its environment, fed by an SQS
queue) is a :class:`Pipeline`, with its DLQ (DLQ_URL, else the queue's RedrivePolicy) and its environment
(its table and keys); an outbox relay (the relay's handler, fed by a table's stream) is a :class:`Relay`.
The outputs of a consumer's prefix (``Payments`` for ``PaymentsFunctionName``) name its queues:
``QueueUrl``, ``DeadLetterQueueUrl``, ``SubscriptionDeadLetterQueueUrl``.

``--function NAME`` takes every name a user has for a function: its name or ARN, a stack output naming it
(``PaymentsFunctionName``), its logical id, or its construct path, whole or from any construct down
(``Movies``, ``Shop/Movies``, ``Movies/Consumer/Function``). A construct names the functions under it, and
among them its consumer (a pipeline's relay lies under the pipeline too). A name naming several is refused
naming them (:class:`Ambiguous`, exit code 2), as is a command that changes something on a stack of several
pipelines without it (:meth:`Found.pipeline`); the commands that only read cover every pipeline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError
from idempotent_runtime import contract
from idempotent_runtime.relay import RELAY_HANDLER

from idempotent_cli.aws import Clients
from idempotent_cli.errors import Ambiguous, DlqError

GONE = ("DELETE_COMPLETE", "DELETE_IN_PROGRESS")
NAMES = "a construct id or path, a function name or ARN, a stack output naming it, or its logical id"


@dataclass(frozen=True, kw_only=True)
class Function:
    """A Lambda function of a stack, with every name a user may have for it."""

    stack: str | None
    function: str | None  # its name
    environment: Mapping[str, str] | None
    log_group: str | None = None  # its LoggingConfig's
    logical_id: str | None = None
    path: tuple[str, ...] = ()  # its construct path, from the stack down (aws:cdk:path without "Resource")
    construct: tuple[str, ...] = ()  # the construct it serves (a pipeline, a relay): whose its lines are
    outputs: tuple[str, ...] = ()  # the stack's outputs naming it ("FunctionName", "PaymentsFunctionName")
    kind: str = "function"

    @property
    def label(self) -> str:
        return f"{self.stack or '?'}/{self.function or '?'}"

    @property
    def title(self) -> str:
        """For a header: ``Shop/Shop-OrdersFunction-1 (Shop/Orders)``, with the construct path if known."""
        return self.label + (f" ({self.whose})" if self.path else "")

    @property
    def whose(self) -> str:
        """Whose a part is, in a command that covers several: the construct path, else the function name."""
        return "/".join(self.construct) or self.function or "?"

    def describe(self, *, stack: bool = False) -> str:
        """For lists: ``Shop/Orders (Shop-OrdersFunction-1, FunctionName)``; without a construct path
        ``Orders-Fn-1 (FunctionName)`` (``stack``: ``Orders/Orders-Fn-1 (FunctionName)``)."""
        more = ([self.function or "?"] if self.path else []) + list(self.outputs)
        return (self.label if stack and not self.path else self.whose) + (
            f" ({', '.join(more)})" if more else ""
        )

    def named_by(self, name: str) -> bool:
        """Whether ``name`` is its name, its ARN (qualified or not), an output naming it or its logical id."""
        arn = name.startswith("arn:") and name.split(":")[6:7] == [self.function]
        return arn or name in (self.function, self.logical_id, *self.outputs)

    def construct_named(self, name: str) -> tuple[str, ...] | None:
        """The construct on its path that ``name`` names (construct ids from the stack or any construct down:
        ``Orders``, ``Shop/Orders``), or None."""
        wanted = tuple(part for part in name.split("/") if part)
        for end in range(len(wanted), len(self.path) + 1):
            if wanted and self.path[end - len(wanted) : end] == wanted:
                return self.path[:end]
        return None


@dataclass(frozen=True, kw_only=True)
class Pipeline(Function):
    """A consumer and its queues."""

    queue_url: str | None = None
    dead_letter_queue_url: str | None = None
    subscription_dead_letter_queue_url: str | None = None
    kind: str = "pipeline"


@dataclass(frozen=True, kw_only=True)
class Relay(Function):
    """An outbox relay: the function on a table's stream that publishes what a consumer emitted."""

    environment: Mapping[str, str]
    stream_arn: str | None = None  # its DynamoDB stream event source: the table it reads
    kind: str = "outbox relay"

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


@dataclass(frozen=True)
class Deployed:
    """One stack: its functions, consumers first."""

    name: str
    functions: tuple[Function, ...]

    @property
    def pipelines(self) -> list[Pipeline]:
        return [f for f in self.functions if isinstance(f, Pipeline)]

    @property
    def relays(self) -> list[Relay]:
        return [f for f in self.functions if isinstance(f, Relay)]


def listing(functions: list[Pipeline] | list[Relay] | list[Function]) -> str:
    return ", ".join(function.describe() for function in functions)


@dataclass(frozen=True)
class Found:
    """What a command works on: a stack, and the function ``--function`` named in it (None: not given)."""

    stack: Deployed
    named: Function | None

    def pipelines(self) -> list[Pipeline]:
        """For the commands that only read: the consumer named, else every consumer of the stack."""
        return [self._consumer()] if self.named else self.stack.pipelines

    def pipeline(self) -> Pipeline:
        """For the commands that change something: the consumer named, else the stack's only one."""
        found = self.stack.pipelines
        if self.named or len(found) == 1:
            return self._consumer() if self.named else found[0]
        example = next((f"; e.g. --function {p.construct[-1]}" for p in found if len(p.construct) > 1), "")
        raise Ambiguous(
            f"stack {self.stack.name} has {len(found)} pipelines: {listing(found)}; this command changes "
            f"things: choose one with --function NAME ({NAMES}{example})"
        )

    def _consumer(self) -> Pipeline:
        named = self.named
        assert named is not None
        if isinstance(named, Pipeline):
            return named
        if not isinstance(named, Relay):
            raise DlqError(
                f"{named.describe(stack=True)} is a {named.kind} of stack {self.stack.name}, not a "
                f"pipeline's consumer (`logs --function {named.function}` reads its lines); pipelines: "
                + listing(self.stack.pipelines)
            )
        environment = {
            contract.TABLE_NAME.name: named.table_name,
            contract.EMIT_TARGET_ARN.name: named.target_arn,
        }
        relayed = [
            p for p in self.stack.pipelines if environment.items() <= dict(p.environment or {}).items()
        ]
        dlq = named.dead_letter_queue_url
        raise DlqError(
            f"{named.label} is the outbox relay{f' of {relayed[0].label}' if len(relayed) == 1 else ''} (it "
            f"publishes to {named.target_arn or '?'}), not a consumer"
            + (
                f": `dlq list|show|redrive --function {named.function}` read its dead-letter queue and "
                f"publish what it stands for again; purge it with --queue-url {dlq}"
                if dlq
                else ""
            )
        )


def find(clients: Clients, *, stack: str | None, function: str | None) -> Found:
    """The stack named (else the only one with a pipeline, or the one of the function ``function`` names),
    and the function ``function`` names in it. Errors name what there is."""
    stacks = deployed(clients, stack)
    pipelines = [p for s in stacks for p in s.pipelines]
    if function:
        functions = [f for s in stacks for f in s.functions]
        chosen = _pick(functions, function)
        if chosen is None:
            raise DlqError(
                f"no function {function}{f' in stack {stack}' if stack else ''} ({NAMES}); functions: "
                + ", ".join(f"{f.kind} {f.describe(stack=True)}" for f in functions)
            )
        return Found(next(s for s in stacks if s.name == chosen.stack), chosen)
    holding = [s for s in stacks if s.pipelines]
    no = "no function with the runtime's handler fed by an SQS queue"
    if not holding and stack:
        raise DlqError(f"stack {stack} has no pipeline: {no} ({contract.HANDLER}); pass --queue-url")
    if not holding:
        raise DlqError(f"no pipeline is deployed in {clients.where}: {no}; pass --stack or --queue-url")
    if len(holding) > 1:
        raise DlqError(
            f"{len(pipelines)} pipelines are deployed ({', '.join(p.label for p in pipelines)}): choose one "
            "with --stack NAME (and --function NAME if a stack has several)"
        )
    return Found(holding[0], None)


def _pick(functions: list[Function], name: str) -> Function | None:
    """The function ``name`` names (see the module); None: it names none."""
    chosen = [f for f in functions if f.named_by(name)]
    if not chosen:
        under: dict[tuple[str | None, tuple[str, ...]], list[Function]] = {}
        for function in functions:
            construct = function.construct_named(name)
            if construct is not None:
                under.setdefault((function.stack, construct), []).append(function)
        chosen = [f for members in under.values() for f in members]
        if len(under) == 1:  # one construct: its consumer, else its relay, else the function under it
            chosen = [f for f in chosen if _rank(f) == min(map(_rank, chosen))]
    if len(chosen) > 1:
        raise Ambiguous(
            f"--function {name} names {len(chosen)} functions: "
            + ", ".join(f.describe(stack=True) for f in chosen)
            + "; name one by more of its construct path, its function name or its logical id"
            + (", or choose its stack with --stack NAME" if len({f.stack for f in chosen}) > 1 else "")
        )
    return chosen[0] if chosen else None


def _rank(function: Function) -> int:
    return 0 if isinstance(function, Pipeline) else 1 if isinstance(function, Relay) else 2


def deployed(clients: Clients, stack: str | None = None) -> list[Deployed]:
    """The stack named (an error naming the deployed ones if there is none), or every deployed stack; each
    read once per command (the clients keep what was read)."""
    if stack:
        if stack not in clients.read:
            clients.read[stack] = discover(clients, _describe_stack(clients, stack))
        return [clients.read[stack]]
    for description in _stacks(clients):
        if description["StackName"] not in clients.read:
            clients.read[description["StackName"]] = discover(clients, description)
    return list(clients.read.values())


def _describe_stack(clients: Clients, name: str) -> dict[str, Any]:
    try:
        stacks = clients("cloudformation").describe_stacks(StackName=name)["Stacks"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ValidationError":
            raise
        known = ", ".join(s["StackName"] for s in _stacks(clients))
        there = f"deployed stacks: {known}" if known else "no stack is deployed there"
        raise DlqError(f"unknown stack {name} in {clients.where}; {there}") from None
    live = [s for s in stacks if s["StackStatus"] not in GONE]
    if not live:
        raise DlqError(f"stack {name} is deleted ({stacks[0]['StackStatus']})")
    return live[0]


def _stacks(clients: Clients) -> Iterator[dict[str, Any]]:
    """Every live stack but the CDK's bootstrap stack."""
    for page in clients("cloudformation").get_paginator("describe_stacks").paginate():
        for stack in page["Stacks"]:
            if stack["StackStatus"] not in GONE and stack["StackName"] != "CDKToolkit":
                yield stack


def discover(clients: Clients, stack: Mapping[str, Any]) -> Deployed:
    """Every function of the stack, with its names, its construct path, and what it is."""
    name = stack["StackName"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}
    paginator = clients("cloudformation").get_paginator("list_stack_resources")
    resources = [r for page in paginator.paginate(StackName=name) for r in page["StackResourceSummaries"]]
    functions = [
        r for r in resources if r["ResourceType"] == "AWS::Lambda::Function" and r.get("PhysicalResourceId")
    ]
    paths = _paths(clients, name) if functions else {}
    queues = {
        _queue_name(r.get("PhysicalResourceId") or ""): paths.get(r["LogicalResourceId"], ())
        for r in resources
    }
    found: list[Function] = []
    for resource in functions:
        path = paths.get(resource["LogicalResourceId"], ())
        for function in _function(clients, name, resource["PhysicalResourceId"], outputs):
            own = (
                function.queue_url
                if isinstance(function, Pipeline)
                else getattr(function, "dead_letter_queue_url", None)
            )
            common = _common(path, queues.get(_queue_name(own or ""), ()))
            construct = common if len(common) > 1 else path  # deeper than the stack: the construct it serves
            found.append(
                replace(function, logical_id=resource["LogicalResourceId"], path=path, construct=construct)
            )
    return Deployed(
        name,
        tuple(
            sorted(found, key=lambda f: (_rank(f), sorted(f.outputs) or ["~"], f.path, f.logical_id or ""))
        ),
    )


def _paths(clients: Clients, stack: str) -> dict[str, tuple[str, ...]]:
    """Each resource's construct path by logical id, from the template's ``aws:cdk:path`` metadata (none: a
    template the CDK CLI did not write, or GetTemplate refused)."""
    try:
        body = clients("cloudformation").get_template(StackName=stack)["TemplateBody"]
        resources = (json.loads(body) if isinstance(body, str) else body).get("Resources") or {}
    except (ClientError, ValueError, AttributeError):
        return {}
    found = {}
    for logical_id, resource in resources.items():
        path = ((resource or {}).get("Metadata") or {}).get("aws:cdk:path")
        if isinstance(path, str):
            found[logical_id] = tuple(part for part in path.removesuffix("/Resource").split("/") if part)
    return found


def _common(one: tuple[str, ...], other: tuple[str, ...]) -> tuple[str, ...]:
    """The deepest construct holding both paths (a pipeline holds its consumer and its source queue, a relay
    its function and its DLQ)."""
    same = 0
    while same < min(len(one), len(other)) and one[same] == other[same]:
        same += 1
    return one[:same]


def _role(configuration: Mapping[str, Any]) -> type[Function]:
    """What a function's configuration makes it: a consumer's, an outbox relay's, or another function."""
    environment = set((configuration.get("Environment") or {}).get("Variables") or {})
    handler = configuration.get("Handler")
    if (
        handler == contract.HANDLER
        or {contract.TABLE_NAME.name, contract.IDEMPOTENCY_MODE.name} <= environment
    ):
        return Pipeline
    if handler == RELAY_HANDLER or environment & {
        contract.EMIT_TARGET_ARN.name,
        contract.TABLE_NAME.name,
    } == {contract.EMIT_TARGET_ARN.name}:
        return Relay
    return Function


def _function(clients: Clients, stack: str, name: str, outputs: Mapping[str, str]) -> list[Function]:
    """The function: a consumer (one per SQS queue it is fed by), a relay, or a function of another kind."""
    configuration = clients("lambda").get_function_configuration(FunctionName=name)
    environment = dict((configuration.get("Environment") or {}).get("Variables") or {})
    arn, role = configuration.get("FunctionArn"), _role(configuration)
    names: dict[str, Any] = {
        "stack": stack,
        "function": name,
        "environment": environment,
        "log_group": (configuration.get("LoggingConfig") or {}).get("LogGroup"),
        "outputs": tuple(key for key, value in outputs.items() if value in (name, arn)),
    }
    if role is Pipeline:
        # The outputs of its prefix name its queues ("PaymentsQueueUrl" beside "PaymentsFunctionName").
        prefix = next(
            (o[: -len("FunctionName")] for o in names["outputs"] if o.endswith("FunctionName")), "~"
        )
        queues = {key.removeprefix(prefix): value for key, value in outputs.items() if key.startswith(prefix)}
        dlq = queues.get("DeadLetterQueueUrl") or environment.get(contract.DLQ_URL.name)
        return [
            Pipeline(
                **names,
                queue_url=queues.get("QueueUrl") or queue,
                dead_letter_queue_url=dlq or _dlq_of(clients, queue),
                subscription_dead_letter_queue_url=queues.get("SubscriptionDeadLetterQueueUrl"),
            )
            for queue in (queue_url_of(clients, arn) for arn in _mapped(clients, name, "sqs"))
        ] or [Function(**names)]
    if role is Relay:
        return [Relay(**names, stream_arn=next(iter(_mapped(clients, name, "dynamodb")), None))]
    return [Function(**names, kind="durable function" if configuration.get("DurableConfig") else "function")]


def of_queues(
    clients: Clients, dlq_url: str, source_url: str | None, function: str | None, *, subscription: bool
) -> Pipeline:
    """``--queue-url``: the pipeline of the DLQ given (``subscription``: an SNS subscription's). Its source
    queue: given, else the one ``function`` is fed by, else the one whose RedrivePolicy names the DLQ; its
    consumer: given, else the one the source queue feeds."""
    check_queue(clients, dlq_url, "dead-letter queue")
    if source_url is None and function:
        sources = [queue_url_of(clients, arn) for arn in _mapped(clients, function, "sqs")]
        source_url = sources[0] if len(sources) == 1 else None
    if source_url is None and not subscription:
        sources = clients("sqs").list_dead_letter_source_queues(QueueUrl=dlq_url).get("queueUrls", [])
        if len(sources) > 1:
            raise DlqError(
                f"{dlq_url} is the dead-letter queue of {len(sources)} queues ({', '.join(sources)}): name "
                "the one to redrive to with --source-queue-url"
            )
        source_url = sources[0] if sources else None
    if function is None and source_url:
        fed = [m["FunctionArn"] for m in _mappings(clients, EventSourceArn=queue_arn_of(clients, source_url))]
        consumers = [f for f in fed if _role(_configuration(clients, f)) is Pipeline]
        function = consumers[0].split(":")[6] if len(consumers) == 1 else None
    environment = (
        (_configuration(clients, function).get("Environment") or {}).get("Variables") if function else None
    )
    return Pipeline(
        stack=None,
        function=function,
        environment=dict(environment or {}) if function else None,
        queue_url=source_url,
        dead_letter_queue_url=None if subscription else dlq_url,
        subscription_dead_letter_queue_url=dlq_url if subscription else None,
    )


# -- lookups --------------------------------------------------------------------------------------------


def _configuration(clients: Clients, function: str) -> dict[str, Any]:
    try:
        return dict(clients("lambda").get_function_configuration(FunctionName=function))
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise DlqError(f"no function {function} in {clients.where}") from None
        raise


def _mapped(clients: Clients, function: str, service: str) -> list[str]:
    """The ARNs of the ``service`` event sources (``sqs``; ``dynamodb``: a table's stream) feeding
    ``function``."""
    arns = [m.get("EventSourceArn", "") for m in _mappings(clients, FunctionName=function)]
    return [arn for arn in arns if arn.startswith("arn:") and arn.split(":")[2] == service]


def _mappings(clients: Clients, **by: str) -> list[dict[str, Any]]:
    """The event source mappings ``by`` chooses (``FunctionName=...`` or ``EventSourceArn=...``)."""
    paginator = clients("lambda").get_paginator("list_event_source_mappings")
    return [m for page in paginator.paginate(**by) for m in page["EventSourceMappings"]]


def redrive_policy(clients: Clients, queue_url: str) -> dict[str, Any]:
    attributes = clients("sqs").get_queue_attributes(QueueUrl=queue_url, AttributeNames=["RedrivePolicy"])
    policy = attributes.get("Attributes", {}).get("RedrivePolicy")
    return json.loads(policy) if policy else {}


def _dlq_of(clients: Clients, queue_url: str) -> str | None:
    target = redrive_policy(clients, queue_url).get("deadLetterTargetArn")
    return queue_url_of(clients, target) if target else None


def subscriptions(clients: Clients, queue_url: str) -> list[dict[str, Any]]:
    """The SNS subscriptions delivering to ``queue_url``."""
    arn = queue_arn_of(clients, queue_url)
    pages = clients("sns").get_paginator("list_subscriptions").paginate()
    return [
        s
        for page in pages
        for s in page["Subscriptions"]
        if (s.get("Protocol"), s.get("Endpoint")) == ("sqs", arn)
    ]


def _queue_name(url: str) -> str:
    """A queue's account and name: endpoints write a URL's host differently."""
    return "/".join(url.rstrip("/").split("/")[-2:])


def queue_url_of(clients: Clients, arn: str) -> str:
    parts = arn.split(":")
    return clients("sqs").get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]


def queue_arn_of(clients: Clients, url: str) -> str:
    attributes = clients("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return attributes["Attributes"]["QueueArn"]


def check_queue(clients: Clients, url: str, role: str) -> None:
    try:
        queue_arn_of(clients, url)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if "NonExistentQueue" in code or "QueueDoesNotExist" in code:
            raise DlqError(f"the {role} {url} does not exist in {clients.where}") from None
        raise
