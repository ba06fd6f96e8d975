"""Helpers of the command line's tests: one moto server on loopback, dead letters in the runtime's exact
shape, pipelines built through the APIs (CloudFormation stacks with and without outputs), and a scripted
console. The fixtures built on them are in ``conftest.py``.

The format of a dead letter lives in :func:`dead_letter` only, built from the contract's names.
"""

from __future__ import annotations

import atexit
import io
import json
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

import boto3
from idempotent_runtime import contract
from idempotent_runtime.relay import RELAY_HANDLER

from idempotent_cli.console import Console
from idempotent_cli.dlq import main

REGION = "us-east-1"
ACCOUNT = "123456789012"
FAKE = {"aws_access_key_id": "fake", "aws_secret_access_key": "fake", "region_name": REGION}
# What a receive asks for to see a message whole.
ATTRIBUTE_LISTS = ("AttributeNames", "MessageSystemAttributeNames", "MessageAttributeNames")

_server: Any = None


def endpoint() -> str:
    """The moto server of this test process (started on first use, stopped at exit)."""
    global _server
    if _server is None:
        from moto.server import ThreadedMotoServer

        from idempotent_local import server

        # The emulator's own server: moto taught by the local cloud, as `local serve` runs it.
        server.install()
        _server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        _server.start()
        atexit.register(_server.stop)
        _, port = _server.get_host_and_port()
        server.install(endpoint=f"http://localhost:{port}")
    _, port = _server.get_host_and_port()
    return f"http://localhost:{port}"


def reset() -> None:
    request = urllib.request.Request(f"{endpoint()}/moto-api/reset", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=10):
        pass


_clients: dict[str, Any] = {}


def client(service: str) -> Any:
    if service not in _clients:
        _clients[service] = boto3.session.Session(**FAKE).client(service, endpoint_url=endpoint())
    return _clients[service]


# -- the cloud as the tool sees it ----------------------------------------------------------------------


@dataclass
class Terminal:
    """A scripted console: what was printed, what to answer, whether stdin/stdout are terminals; a clock
    that moves only when the tool sleeps (so waits are asserted without wall-clock time)."""

    answers: list[str] = field(default_factory=list)
    interactive: bool = False
    tty: bool = False
    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        terminal = self

        class Out(io.StringIO):
            def isatty(self) -> bool:
                return terminal.tty

        self.out, self.err = Out(), io.StringIO()

    def ask(self, question: str) -> str:
        self.questions.append(question)
        return self.answers.pop(0) if self.answers else ""

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def console(self) -> Console:
        return Console(
            out=self.out,
            err=self.err,
            ask=self.ask,
            interactive=lambda: self.interactive,
            sleep=self.sleep,
            clock=lambda: self.now,
        )

    @property
    def lines(self) -> list[str]:
        return self.out.getvalue().splitlines()

    @property
    def error(self) -> str:
        return self.err.getvalue()


def dlq(*argv: str, terminal: Terminal | None = None, **kwargs: Any) -> tuple[int, Terminal]:
    """Run ``idempotent-pipeline dlq ARGV`` (short polls: the test server answers at once)."""
    terminal = terminal or Terminal()
    code = main([*argv, "--wait-seconds", "0"], console=terminal.console(), **kwargs)
    return code, terminal


def command(*argv: str, terminal: Terminal | None = None, **kwargs: Any) -> tuple[int, Terminal]:
    """Run ``idempotent-pipeline ARGV`` (``trace``, ``logs``...) on a scripted console; ``kwargs`` go to the
    command's ``run`` (``connect=``)."""
    from idempotent_cli.main import parser

    terminal = terminal or Terminal()
    args = parser().parse_args(list(argv))
    if hasattr(args, "wait_seconds"):
        args.wait_seconds = 0  # short polls: the test server answers at once
    return args.func(args, console=terminal.console(), **kwargs), terminal


# -- queues, tables and pipelines -----------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_queue(
    name: str,
    *,
    fifo: bool = True,
    dlq_arn: str | None = None,
    max_receive_count: int = 3,
    content_dedup: bool = False,
) -> str:
    attributes = {}
    if fifo:
        name += ".fifo"
        attributes["FifoQueue"] = "true"
        if content_dedup:
            attributes["ContentBasedDeduplication"] = "true"
    if dlq_arn:
        attributes["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count}
        )
    return client("sqs").create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]


def queue_arn(url: str) -> str:
    return client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]


def make_table(name: str) -> str:
    client("dynamodb").create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    )
    return name


@dataclass
class Pipeline:
    stack: str
    queue_url: str
    dlq_url: str
    table: str
    function: str
    environment: dict[str, str]


def _pipeline_resources(
    name: str, prefix: str, *, fifo: bool, variables: dict[str, Any], max_receive_count: int, role: str
) -> dict[str, Any]:
    """The resources of one pipeline (queue + DLQ + table + consumer function + event source mapping), their
    logical ids starting with ``prefix``."""
    suffix = ".fifo" if fifo else ""
    fifo_props = {"FifoQueue": True} if fifo else {}
    dead_letter_queue, queue, table, function = (
        f"{prefix}{part}" for part in ("DeadLetterQueue", "Queue", "Table", "Function")
    )
    return {
        dead_letter_queue: {
            "Type": "AWS::SQS::Queue",
            "Properties": {"QueueName": f"{name}-dlq{suffix}", **fifo_props},
        },
        queue: {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": f"{name}{suffix}",
                **fifo_props,
                "RedrivePolicy": {
                    "deadLetterTargetArn": {"Fn::GetAtt": [dead_letter_queue, "Arn"]},
                    "maxReceiveCount": max_receive_count,
                },
            },
        },
        table: {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "TableName": f"{name}-table",
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": [
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "StreamSpecification": {"StreamViewType": "NEW_IMAGE"},
            },
        },
        function: {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": contract.HANDLER,
                "Runtime": "python3.12",
                "Role": role,
                "Code": {"ZipFile": "handler = None"},
                "Environment": {
                    "Variables": {
                        "TABLE_NAME": {"Ref": table},
                        "DLQ_URL": {"Ref": dead_letter_queue},
                        "IDEMPOTENCY_MODE": "document",
                        "KEY_SOURCE": "fields",
                        "QUEUE_TYPE": "fifo" if fifo else "standard",
                        "MAX_RECEIVE_COUNT": str(max_receive_count),
                        **variables,
                    }
                },
            },
        },
        f"{prefix}Mapping": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "FunctionName": {"Ref": function},
                "EventSourceArn": {"Fn::GetAtt": [queue, "Arn"]},
                "BatchSize": 10,
            },
        },
    }


def _pipeline_outputs(prefix: str) -> dict[str, Any]:
    """The outputs the reference stack names a pipeline by (``prefix`` first: none for the main one)."""
    return {
        f"{prefix}QueueUrl": {"Value": {"Ref": f"{prefix}Queue"}},
        f"{prefix}DeadLetterQueueUrl": {"Value": {"Ref": f"{prefix}DeadLetterQueue"}},
        f"{prefix}TableName": {"Value": {"Ref": f"{prefix}Table"}},
        f"{prefix}FunctionName": {"Value": {"Ref": f"{prefix}Function"}},
    }


def _role() -> str:
    return client("iam").create_role(RoleName=unique("role"), AssumeRolePolicyDocument="{}")["Role"]["Arn"]


def _create_stack(name: str, template: dict[str, Any]) -> dict[str, str]:
    """Create the stack; returns each resource's physical id by logical id."""
    cloudformation = client("cloudformation")
    cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))
    return {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cloudformation.list_stack_resources(StackName=name)["StackResourceSummaries"]
    }


def _deployed(stack: str, name: str, resources: dict[str, str], prefix: str, fifo: bool) -> Pipeline:
    suffix = ".fifo" if fifo else ""
    sqs = client("sqs")
    function = resources[f"{prefix}Function"]
    env = client("lambda").get_function_configuration(FunctionName=function)["Environment"]["Variables"]
    return Pipeline(
        stack=stack,
        queue_url=sqs.get_queue_url(QueueName=f"{name}{suffix}")["QueueUrl"],
        dlq_url=sqs.get_queue_url(QueueName=f"{name}-dlq{suffix}")["QueueUrl"],
        table=resources[f"{prefix}Table"],
        function=function,
        environment=env,
    )


def deploy_pipeline(
    *,
    outputs: bool = True,
    fifo: bool = True,
    environment: dict[str, str] | None = None,
    max_receive_count: int = 3,
    stack: str | None = None,
) -> Pipeline:
    """A stack like the reference one (queue + DLQ + table + consumer function + event source mapping),
    created through CloudFormation; ``outputs=False`` leaves out the outputs (the tool then reads the
    resources)."""
    name = stack or unique("pipeline")
    template: dict[str, Any] = {
        "Resources": _pipeline_resources(
            name,
            "",
            fifo=fifo,
            variables=environment or {},
            max_receive_count=max_receive_count,
            role=_role(),
        )
    }
    if outputs:
        template["Outputs"] = _pipeline_outputs("")
    return _deployed(name, name, _create_stack(name, template), "", fifo)


@dataclass
class Hops:
    """A stack of two pipelines like the reference app with ``-c outbox=true``: orders (the outputs without
    prefix) emits to the payments queue through an outbox relay; payments (``Payments...`` outputs) keys by
    the deduplication id."""

    stack: str
    orders: Pipeline
    payments: Pipeline
    relay: str  # the relay's function
    relay_dlq_url: str
    notifier: str | None = None  # a plain function of the stack (with construct paths)


# Construct paths as IdempotentPipeline lays a pipeline out (the aws:cdk:path metadata the CDK CLI writes into
# a template, without the trailing "/Resource"), by logical id: {p} the pipeline's prefix, {c} its construct.
PIPELINE_PATHS = {
    "{p}DeadLetterQueue": "{c}/Messaging/DeadLetterQueue",
    "{p}Queue": "{c}/Messaging/Queue",
    "{p}Table": "{c}/Table/Table",
    "{p}Function": "{c}/Consumer/Function",
    "{p}Mapping": "{c}/Consumer/Function/SqsEventSource",
}
HOPS_PATHS = {
    **{key.format(p=""): path.format(c="Orders") for key, path in PIPELINE_PATHS.items()},
    **{key.format(p="Payments"): path.format(c="Payments") for key, path in PIPELINE_PATHS.items()},
    "RelayDeadLetterQueue": "Orders/Consumer/Relay/DeadLetterQueue",
    "RelayFunction": "Orders/Consumer/Relay/Function",
    "RelayMapping": "Orders/Consumer/Relay/Function/DynamoDBEventSource",
    "NotifierFunction": "Notifier",
}


def deploy_hops(*, outputs: bool = True, paths: bool = False) -> Hops:
    """The stack; ``paths``: with the construct paths of :data:`HOPS_PATHS` and a plain function (Notifier)
    that prints each event it gets."""
    name = unique("hops")
    role = _role()
    payments = f"{name}-payments"
    resources = {
        **_pipeline_resources(
            name,
            "",
            fifo=True,
            variables={
                "PARTITION_KEY_FIELD": "order_id",
                "SORT_KEY_FIELD": "line_id",
                "IDEMPOTENCY_MODE": "transaction",
                "PROCESSOR": "dlq_processors:add_to_order",
                "EMIT_TARGET_ARN": {"Fn::GetAtt": ["PaymentsQueue", "Arn"]},
            },
            max_receive_count=3,
            role=role,
        ),
        **_pipeline_resources(
            payments,
            "Payments",
            fifo=True,
            variables={"KEY_SOURCE": "dedup_id"},
            max_receive_count=3,
            role=role,
        ),
        "RelayDeadLetterQueue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": f"{name}-relay-dlq"}},
        "RelayFunction": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": RELAY_HANDLER,
                "Runtime": "python3.12",
                "Role": role,
                "Code": {"ZipFile": "handler = None"},
                "Environment": {
                    "Variables": {
                        "EMIT_TARGET_ARN": {"Fn::GetAtt": ["PaymentsQueue", "Arn"]},
                        "DLQ_URL": {"Ref": "RelayDeadLetterQueue"},
                        "TABLE_NAME": {"Ref": "Table"},
                    }
                },
            },
        },
        "RelayMapping": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "FunctionName": {"Ref": "RelayFunction"},
                "EventSourceArn": {"Fn::GetAtt": ["Table", "StreamArn"]},
                "StartingPosition": "TRIM_HORIZON",
            },
        },
    }
    if paths:
        code = "def handler(event, context):\n    print('notified', event)\n"
        resources["NotifierFunction"] = {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": "index.handler",
                "Runtime": "python3.12",
                "Role": role,
                "Code": {"ZipFile": code},
            },
        }
        for logical_id, path in HOPS_PATHS.items():
            resources[logical_id]["Metadata"] = {"aws:cdk:path": f"{name}/{path}/Resource"}
    template: dict[str, Any] = {"Resources": resources}
    if outputs:
        template["Outputs"] = {**_pipeline_outputs(""), **_pipeline_outputs("Payments")}
        del template["Outputs"]["PaymentsQueueUrl"], template["Outputs"]["PaymentsDeadLetterQueueUrl"]
    made = _create_stack(name, template)
    return Hops(
        stack=name,
        orders=_deployed(name, name, made, "", True),
        payments=_deployed(name, payments, made, "Payments", True),
        relay=made["RelayFunction"],
        relay_dlq_url=client("sqs").get_queue_url(QueueName=f"{name}-relay-dlq")["QueueUrl"],
        notifier=made.get("NotifierFunction"),
    )


def make_subscription_dlq(pipeline: Pipeline, *, fifo: bool = False) -> str:
    """A topic (FIFO or standard) delivering to the pipeline's queue, whose subscription has a DLQ of the
    same kind; returns the DLQ's URL."""
    sns = client("sns")
    name = unique("orders") + (".fifo" if fifo else "")
    topic = sns.create_topic(Name=name, Attributes={"FifoTopic": "true"} if fifo else {})["TopicArn"]
    dlq_url = make_queue(unique("subscription-dlq"), fifo=fifo)
    subscription = sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=queue_arn(pipeline.queue_url),
        Attributes={"RawMessageDelivery": "true"},
    )["SubscriptionArn"]
    sns.set_subscription_attributes(
        SubscriptionArn=subscription,
        AttributeName="RedrivePolicy",
        AttributeValue=json.dumps({"deadLetterTargetArn": queue_arn(dlq_url)}),
    )
    return dlq_url


# -- dead letters ---------------------------------------------------------------------------------------


def dead_letter(
    body: str,
    *,
    queue_url: str,
    kind: contract.DeadLetterKind = contract.DeadLetterKind.INVALID,
    reason: str = "partition key field 'x' is missing from the body",
    source_message_id: str | None = None,
    group_id: str | None = "g1",
    dedup_id: str | None = None,
    key: dict[str, str] | None = None,
    attributes: dict[str, str] | None = None,
    receive_count: int = 1,
    function: str = "consumer",
    dropped: list[str] | None = None,
    extra_attributes: dict[str, dict[str, Any]] | None = None,
    **details: Any,
) -> dict[str, Any]:
    """Send a dead letter as the runtime sends one (docs/runtime-contract.md, "what the runtime sends to the
    DLQ"); returns the SendMessage answer plus ``source_message_id``."""
    source_message_id = source_message_id or str(uuid.uuid4())
    message_attributes: dict[str, dict[str, Any]] = {
        name: {"DataType": "String", "StringValue": value} for name, value in (attributes or {}).items()
    }
    message_attributes.update(extra_attributes or {})
    message_attributes[contract.DLQ_REASON_ATTRIBUTE] = {"DataType": "String", "StringValue": reason}
    message_attributes[contract.DLQ_DETAILS_ATTRIBUTE] = {
        "DataType": "String",
        "StringValue": json.dumps(
            {
                "kind": kind.value,
                "source_message_id": source_message_id,
                "group_id": group_id,
                "dedup_id": dedup_id,
                "key": key,
                "receive_count": receive_count,
                "function": function,
                "dropped_attributes": dropped or [],
                **details,
            }
        ),
    }
    request: dict[str, Any] = {
        "QueueUrl": queue_url,
        "MessageBody": body,
        "MessageAttributes": message_attributes,
    }
    if queue_url.endswith(".fifo"):
        request["MessageGroupId"] = group_id or source_message_id
        request["MessageDeduplicationId"] = source_message_id
    response = client("sqs").send_message(**request)
    return {**response, "source_message_id": source_message_id}


def body(x: str, y: str = "1", **fields: Any) -> str:
    return json.dumps({"x": x, "y": y, **fields})


# -- reading queues back --------------------------------------------------------------------------------


def receive(queue_url: str, count: int = 10, **options: Any) -> list[dict[str, Any]]:
    """One receive of up to ``count`` messages, all attributes included; ``options`` go to ReceiveMessage."""
    return (
        client("sqs")
        .receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=count,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
            **options,
        )
        .get("Messages", [])
    )


def drain(queue_url: str) -> list[dict[str, Any]]:
    """Every message of the queue, in the order the queue hands them out, deleted (for assertions)."""
    messages: list[dict[str, Any]] = []
    while batch := receive(queue_url, WaitTimeSeconds=0):
        for message in batch:
            client("sqs").delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        messages += batch
    return messages


def peek(queue_url: str) -> list[dict[str, Any]]:
    """Every message of the queue, in the order the queue hands them out, left in place (received, then
    made visible again)."""
    sqs = client("sqs")
    messages: list[dict[str, Any]] = []
    while batch := receive(queue_url, VisibilityTimeout=60):
        messages += batch
    for message in messages:
        sqs.change_message_visibility(
            QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    return messages


def by_group(messages: list[dict[str, Any]]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for message in messages:
        groups.setdefault(message["Attributes"].get("MessageGroupId", "-"), []).append(message["Body"])
    return groups


def attribute(message: dict[str, Any], name: str) -> str | None:
    value = (message.get("MessageAttributes") or {}).get(name)
    return value.get("StringValue") if value else None


# -- SQS behaviour the tests need from moto -------------------------------------------------------------


class Deduplication:
    """The clock of the emulator's FIFO deduplication (patch ``fifo-deduplication``: a deduplication id is
    remembered for 5 minutes from its accepted send, also after the message was deleted), which the tests
    move on with ``elapse(seconds)``."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        import time

        return time.time() + self.offset

    def elapse(self, seconds: float) -> None:
        self.offset += seconds


def hooked(event: str, callback: Any, *more: tuple[str, Any]) -> Any:
    """A ``connect`` for :func:`dlq`: the default-credential clients, with ``callback`` registered for the
    botocore ``event`` (e.g. ``before-call.dynamodb.DeleteItem``: something happens just before the tool's
    request), and each further (event, callback) of ``more``."""
    from idempotent_cli import aws

    def connect(args: Any) -> Any:
        clients = aws.connect(local=False)
        factory = clients.factory

        def make(service: str) -> Any:
            made = factory(service)
            for name, function in ((event, callback), *more):
                made.meta.events.register(name, function)
            return made

        clients.factory = make
        return clients

    return connect


def failing_entries(
    operation: str, when: Any, code: str = "InternalError", message: str = "injected failure"
) -> Any:
    """A ``connect`` for :func:`dlq` whose SQS batch ``operation`` (``SendMessageBatch``...) fails the entries
    ``when(params, entry)`` chooses as SQS fails an entry: not done, listed under ``Failed`` in the answer
    beside the others, which are done (when it chooses every entry, the request fails)."""
    from botocore.exceptions import ClientError

    refused: list[dict[str, Any]] = []

    def take_out(params: dict[str, Any], **_: Any) -> None:
        refused[:] = [entry for entry in params["Entries"] if when(params, entry)]
        if refused and len(refused) == len(params["Entries"]):
            raise ClientError({"Error": {"Code": code, "Message": message}}, operation)
        params["Entries"] = [entry for entry in params["Entries"] if entry not in refused]

    def answer(parsed: dict[str, Any], **_: Any) -> None:
        failed = [
            {"Id": entry["Id"], "SenderFault": False, "Code": code, "Message": message} for entry in refused
        ]
        parsed.setdefault("Failed", []).extend(failed)

    return hooked(
        f"before-parameter-build.sqs.{operation}", take_out, (f"after-call.sqs.{operation}", answer)
    )


def sqs_size(request: dict[str, Any]) -> int:
    """The size SQS counts against a queue's MaximumMessageSize: the body plus every message attribute's
    name, type and value, in bytes."""
    size = len(request["MessageBody"].encode("utf-8"))
    for name, value in (request.get("MessageAttributes") or {}).items():
        raw = value["StringValue"].encode("utf-8") if "StringValue" in value else value["BinaryValue"]
        size += len(name.encode("utf-8")) + len(value["DataType"].encode("utf-8")) + len(raw)
    return size


def size_limited() -> Any:
    """A ``connect`` for :func:`dlq` whose SendMessageBatch refuses an entry as SQS refuses a message over the
    queue's MaximumMessageSize (moto counts the body only)."""

    def too_big(params: dict[str, Any], entry: dict[str, Any]) -> bool:
        limit = client("sqs").get_queue_attributes(
            QueueUrl=params["QueueUrl"], AttributeNames=["MaximumMessageSize"]
        )["Attributes"]["MaximumMessageSize"]
        return sqs_size(entry) > int(limit)

    return failing_entries(
        "SendMessageBatch",
        too_big,
        "InvalidParameterValue",
        "One or more parameters are invalid. Reason: Message must be shorter than the queue's "
        "MaximumMessageSize",
    )


def failing(operation: str, when: Any, error: BaseException | None = None) -> Any:
    """A ``connect`` for :func:`dlq` whose SQS ``operation`` (e.g. DeleteMessageBatch) raises ``error``
    (default: a service error) for the requests ``when(params)`` chooses, before reaching SQS."""
    from botocore.exceptions import ClientError

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if when(params):
            failure = {"Error": {"Code": "InternalError", "Message": "injected failure"}}
            raise error or ClientError(failure, operation)  # type: ignore[arg-type]

    return hooked(f"before-parameter-build.sqs.{operation}", refuse)


# -- the consumer, as Lambda's event source mapping runs it ---------------------------------------------


class LambdaContext:
    function_name = "consumer"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def consumer(pipeline: Pipeline, processor: Any = None) -> Any:
    """The bundled handler with the deployed function's configuration (its environment)."""
    from idempotent_runtime.config import Config
    from idempotent_runtime.flow import build_handler

    return build_handler(
        Config.from_env(pipeline.environment),
        dynamodb_client=client("dynamodb"),
        sqs_client=client("sqs"),
        processor=processor,
    )


def consume(pipeline: Pipeline, handler: Any, *, batch: int = 10) -> list[tuple[str, str]]:
    """Deliver everything in the source queue to ``handler`` as the event source mapping would (delete what
    succeeded), ``batch`` messages at a time; returns (body, outcome) per delivery, in order."""
    from idempotent_local.events import lambda_sqs_event

    sqs = client("sqs")
    arn = queue_arn(pipeline.queue_url)
    outcomes: list[tuple[str, str]] = []
    while True:
        messages = receive(pipeline.queue_url, batch, VisibilityTimeout=30)
        if not messages:
            return outcomes
        results = {
            r.message.message_id: r
            for r in handler.process_batch(lambda_sqs_event(messages, arn), LambdaContext())
        }
        for message in messages:
            result = results[message["MessageId"]]
            outcome = getattr(result.outcome, "value", result.outcome)
            outcomes.append((message["Body"], outcome))
            if outcome in ("processed", "duplicate"):
                sqs.delete_message(QueueUrl=pipeline.queue_url, ReceiptHandle=message["ReceiptHandle"])


def publish(pipeline: Pipeline, message_body: str, group: str = "g", dedup_id: str | None = None) -> str:
    request: dict[str, Any] = {"QueueUrl": pipeline.queue_url, "MessageBody": message_body}
    if pipeline.queue_url.endswith(".fifo"):
        request["MessageGroupId"] = group
        request["MessageDeduplicationId"] = dedup_id or uuid.uuid4().hex
    return client("sqs").send_message(**request)["MessageId"]
