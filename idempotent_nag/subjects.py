"""What the rules look at: an app's templates read as subjects, each a frozen dataclass of plain values (an
event source mapping or an EventBridge pipe with what it reads and invokes, a queue or a subscription with its
dead-letter queue, an EventBridge rule's target, a dead-letter queue and whether an alarm watches it, ...).

A setting a template leaves out takes the service's default. A value the templates cannot tell (a
parameter, a resource imported from outside the app) is TOKEN: a rule whose condition reads it is skipped
(``idempotent_pipeline._rules.holds``), never guessed at.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from itertools import chain
from typing import Any

from idempotent_runtime import contract
from idempotent_runtime.contract import Mode

from idempotent_nag.templates import (
    ALARM,
    FUNCTION,
    INVOKE_CONFIG,
    KEY,
    MAPPING,
    PIPE,
    QUEUE,
    ROLE,
    RULE,
    SUBSCRIPTION,
    TABLE,
    TOPIC,
    Resource,
    Templates,
    document,
    flag,
    known,
    listed,
    number,
)
from idempotent_pipeline import consumer
from idempotent_pipeline._facts import (
    SQS_DEFAULT_RETENTION_SECONDS,
    SQS_DEFAULT_VISIBILITY_SECONDS,
    QueueFacts,
)
from idempotent_pipeline._rules import TOKEN

SQS, DYNAMODB, KINESIS, LAMBDA = "sqs", "dynamodb", "kinesis", "lambda"
STREAMS = (DYNAMODB, KINESIS)
# What an event source mapping reads, by the type of the resource its EventSourceArn names, or by the
# service in an ARN from outside the app.
SOURCE_TYPES = {
    QUEUE: SQS,
    TABLE: DYNAMODB,
    "AWS::Kinesis::Stream": KINESIS,
    "AWS::Kinesis::StreamConsumer": KINESIS,
}
# What an EventBridge rule's target is, of those the rules check.
TARGET_TYPES = {QUEUE: SQS, FUNCTION: LAMBDA}
# A pipe's parameters for what it reads (the names a mapping gives its own: BatchSize, MaximumRetryAttempts).
PIPE_PARAMETERS = {
    SQS: "SqsQueueParameters",
    DYNAMODB: "DynamoDBStreamParameters",
    KINESIS: "KinesisStreamParameters",
}
# Lambda's defaults: BatchSize per source, a function's Timeout, no batching window, and -1 (retry until
# the record expires) for a stream mapping's MaximumRetryAttempts and MaximumRecordAgeInSeconds.
DEFAULT_BATCH_SIZE = {SQS: 10, DYNAMODB: 100, KINESIS: 100}
LAMBDA_DEFAULT_TIMEOUT_SECONDS = 3
UNBOUNDED = -1
# The most retries a stream mapping takes: a record failing that often holds its shard as long as one retrying
# until it expires.
STREAM_MAX_RETRIES = 10_000
# SQS and SNS settings of a FIFO queue or topic with high throughput.
HIGH_THROUGHPUT_QUEUE = {"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}
HIGH_THROUGHPUT_TOPIC = {"FifoThroughputScope": "MessageGroup"}
# Subscriptions whose endpoint is part of an application (an email or an SMS subscription is not checked).
PIPELINE_PROTOCOLS = (SQS, LAMBDA)
DEAD_LETTERS_METRIC = ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
ALARM_ACTIONS = ("AlarmActions", "OKActions", "InsufficientDataActions")
CLOUDWATCH, SNS = "cloudwatch.amazonaws.com", "sns.amazonaws.com"
# What CloudWatch does with a KMS-encrypted alarm topic's key.
CLOUDWATCH_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
AWS_MANAGED_SNS_KEY = "alias/aws/sns"
# The policy resources that name a queue, a topic or a role, and the property they name it in.
POLICIES = {
    QUEUE: (("AWS::SQS::QueuePolicy", "Queues"), ("AWS::SQS::QueueInlinePolicy", "Queue")),
    TOPIC: (("AWS::SNS::TopicPolicy", "Topics"), ("AWS::SNS::TopicInlinePolicy", "TopicArn")),
    ROLE: (
        ("AWS::IAM::Policy", "Roles"),
        ("AWS::IAM::ManagedPolicy", "Roles"),
        ("AWS::IAM::RolePolicy", "RoleName"),
    ),
}
# AWS managed policies a function's role has that allow no KMS action: Lambda's execution-role policies (CDK
# attaches the basic one) and X-Ray's (tracing). Any other managed policy from outside the app may allow it.
NO_KMS_POLICIES = (":iam::aws:policy/service-role/AWSLambda", ":iam::aws:policy/AWSXRayDaemonWriteAccess")
# A table is an idempotency store when this library's runtime names it (TABLE_NAME), or when an environment
# variable or the table's own name or id says so (Powertools' examples: IDEMPOTENCY_TABLE).
IDEMPOTENCY_MARK = "idempoten"


# -- subjects -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventSource:
    """An event source mapping or an EventBridge pipe, with what the app says about its source and its
    function (a pipe's parameters for its source name their settings as a mapping's properties do)."""

    resource: Resource
    kind: str | None  # SQS, DYNAMODB, KINESIS, or None (another source)
    queue: Resource | None  # the queue of the app it reads
    function: Resource | None  # the function a mapping invokes
    batch_size: Any
    reports_failures: Any
    window: Any  # MaximumBatchingWindowInSeconds
    visibility: Any  # the SQS queue's visibility timeout
    timeout: Any  # the function's
    reserved: Any  # the function's reserved concurrency (None: not set)
    max_concurrency: Any  # ScalingConfig.MaximumConcurrency (None: not set)
    filtered: bool
    shared: bool  # another mapping or pipe of the app reads the same queue
    has_failure_destination: bool  # DestinationConfig.OnFailure names a destination
    retries: Any  # MaximumRetryAttempts (UNBOUNDED: until the record expires)
    max_age: Any  # MaximumRecordAgeInSeconds
    key_readable: Any  # who polls it may decrypt with the queue's customer managed key (True: no such key)


@dataclass(frozen=True)
class Redrive:
    """A queue or an SNS subscription, and the dead-letter queue its RedrivePolicy names."""

    resource: Resource
    fifo: Any
    high_throughput: Any
    dead_letter: Resource | None  # in the app
    has_dead_letter: bool  # a deadLetterTargetArn, in the app or not
    dead_letter_fifo: Any
    dead_letter_high_throughput: Any


@dataclass(frozen=True)
class Queue(Redrive):
    visibility: Any
    retention: Any
    max_receive_count: Any  # None without a RedrivePolicy
    dead_letter_retention: Any
    consumed: bool  # an event source mapping or a pipe of the app reads it


@dataclass(frozen=True)
class Subscription(Redrive):
    protocol: str
    raw: Any  # RawMessageDelivery
    endpoint_consumed: bool  # its endpoint is a queue an event source mapping of the app reads
    dead_letter_writable: Any  # the dead-letter queue's policy lets SNS send from the topic


@dataclass(frozen=True)
class DeadLetterQueue:
    """A queue something of the app gives up messages to: a RedrivePolicy, an on-failure destination, a
    function's, a pipe's or a rule target's dead-letter queue."""

    resource: Resource
    watched: bool  # an alarm watches its visible messages


@dataclass(frozen=True)
class AlarmTopic:
    resource: Resource
    policy_allows: bool  # every topic policy lets CloudWatch publish (no policy: SNS's default one does)
    key_allows: bool  # CloudWatch may use its KMS key (no key: nothing to allow)


@dataclass(frozen=True)
class Delivery:
    """What a service hands messages to and gives up on: a function an SNS subscription or an EventBridge
    rule invokes (asynchronously), or a rule's Lambda or SQS target (``resource``: the rule)."""

    resource: Resource
    has_failure_destination: bool  # an on-failure destination, or a DeadLetterConfig


@dataclass(frozen=True)
class RuntimeConsumer:
    """A function running this library's runtime (IDEMPOTENCY_MODE in its environment) on an SQS queue."""

    resource: Resource
    lifetime: Any  # seconds its records live (None: never expire)
    arrival_window: Any  # how long after its first delivery a duplicate can still arrive


@dataclass(frozen=True)
class IdempotencyStore:
    resource: Resource
    ttl_attribute: Any  # the attribute TTL is enabled on (None: TTL off)
    expected: str | None  # the attribute the runtime writes (None: any)


# -- reading the templates ------------------------------------------------------------------------------


class Subjects:
    """The subjects of an app's templates, each list read once."""

    def __init__(self, templates: Templates) -> None:
        self.templates = t = templates
        sources = [_event_source(t, resource) for resource in (*t.of_type(MAPPING), *t.of_type(PIPE))]
        readers = Counter(source.queue for source in sources if source.queue is not None)
        self.event_sources = [replace(s, shared=readers[s.queue] > 1) if s.queue else s for s in sources]
        self.queues = [_queue(t, q, consumed=readers[q] > 0) for q in t.of_type(QUEUE)]
        self.subscriptions = [_subscription(t, s, readers) for s in t.of_type(SUBSCRIPTION)]
        self.redrives: list[Redrive] = [*self.queues, *self.subscriptions]
        targets = [(rule, target) for rule in t.of_type(RULE) for target in listed(rule.get("Targets"))]
        self.rule_targets = [
            Delivery(rule, failure_destination(target) is not None)
            for rule, target in targets
            if _source_of(t, rule.stack, target.get("Arn"), TARGET_TYPES) is not None
        ]
        self.dead_letter_queues = _dead_letter_queues(t, self.redrives, targets)
        self.alarm_topics = [_alarm_topic(t, topic) for topic in _alarm_topics(t)]
        self.async_functions = _async_functions(t, self.subscriptions, targets)
        self.runtime_consumers = [
            c for c in (_runtime_consumer(s.queue, s.function) for s in sources if s.kind == SQS) if c
        ]
        self.idempotency_stores = _idempotency_stores(t)


def _source_of(t: Templates, stack: str, arn: Any, types: Mapping[str, str] = SOURCE_TYPES) -> str | None:
    """What an ARN names, by the type of the app's resource (``types``), or by the service in an ARN from
    outside the app."""
    for type_, kind in types.items():
        if (t.function(stack, arn) if type_ == FUNCTION else t.target(stack, arn, type_)) is not None:
            return kind
    text = json.dumps(arn)  # an ARN from outside the app, as text or joined from parts
    return next((kind for kind in dict.fromkeys(types.values()) if f":{kind}:" in text), None)


def _event_source(t: Templates, resource: Resource) -> EventSource:
    """A mapping, or a pipe: its role polls, and it takes the batch item failures its target returns with
    nothing to turn on."""
    pipe = resource.type == PIPE
    arn = resource.get("Source" if pipe else "EventSourceArn")
    kind = _source_of(t, resource.stack, arn)
    queue = t.target(resource.stack, arn, QUEUE) if kind == SQS else None
    function = None if pipe else t.function(resource.stack, resource.get("FunctionName"))
    poller = resource if pipe else function
    role = t.target(poller.stack, poller.get("RoleArn" if pipe else "Role"), ROLE) if poller else None
    parameters = document(resource.get("SourceParameters")).get(PIPE_PARAMETERS.get(kind or "", ""))
    settings = document(parameters) if pipe else resource.properties
    get = settings.get
    return EventSource(
        resource=resource,
        kind=kind,
        queue=queue,
        function=function,
        batch_size=known(get("BatchSize"), DEFAULT_BATCH_SIZE.get(kind or "", TOKEN)),
        reports_failures=pipe or "ReportBatchItemFailures" in listed(get("FunctionResponseTypes")),
        window=known(get("MaximumBatchingWindowInSeconds"), 0),
        visibility=_of(queue, "VisibilityTimeout", SQS_DEFAULT_VISIBILITY_SECONDS),
        timeout=_of(function, "Timeout", LAMBDA_DEFAULT_TIMEOUT_SECONDS),
        reserved=_of(function, "ReservedConcurrentExecutions", None),
        max_concurrency=known(document(get("ScalingConfig")).get("MaximumConcurrency"), None),
        filtered=bool(document(get("FilterCriteria")).get("Filters")),
        shared=False,  # counted over every reader of the app
        has_failure_destination=failure_destination(settings) is not None,
        retries=known(get("MaximumRetryAttempts"), UNBOUNDED),
        max_age=known(get("MaximumRecordAgeInSeconds"), UNBOUNDED),
        key_readable=_may_decrypt(t, queue, role),
    )


def _of(resource: Resource | None, name: str, default: Any) -> Any:
    """A number property of a resource of the app; TOKEN for a resource the app does not define."""
    return TOKEN if resource is None else known(resource.get(name), default)


def _high_throughput(resource: Resource | None, settings: dict[str, str]) -> Any:
    if resource is None:
        return TOKEN
    values = [resource.get(name) for name in settings]
    if any(value is not None and not isinstance(value, str) for value in values):
        return TOKEN
    return values == list(settings.values())


def _queue_fifo(queue: Resource | None) -> Any:
    return TOKEN if queue is None else flag(queue.get("FifoQueue"))


def _redrive(t: Templates, resource: Resource) -> dict[str, Any]:
    """The Redrive fields of a queue's or a subscription's RedrivePolicy."""
    target = document(resource.get("RedrivePolicy")).get("deadLetterTargetArn")
    dead_letter = t.target(resource.stack, target, QUEUE)
    return {
        "resource": resource,
        "dead_letter": dead_letter,
        "has_dead_letter": target is not None,
        "dead_letter_fifo": _queue_fifo(dead_letter),
        "dead_letter_high_throughput": _high_throughput(dead_letter, HIGH_THROUGHPUT_QUEUE),
    }


def _queue(t: Templates, queue: Resource, *, consumed: bool) -> Queue:
    redrive = _redrive(t, queue)
    policy = document(queue.get("RedrivePolicy"))
    dead_letter = redrive["dead_letter"]
    return Queue(
        **redrive,
        fifo=_queue_fifo(queue),
        high_throughput=_high_throughput(queue, HIGH_THROUGHPUT_QUEUE),
        visibility=known(queue.get("VisibilityTimeout"), SQS_DEFAULT_VISIBILITY_SECONDS),
        retention=known(queue.get("MessageRetentionPeriod"), SQS_DEFAULT_RETENTION_SECONDS),
        max_receive_count=known(policy.get("maxReceiveCount"), None) if policy else None,
        dead_letter_retention=_of(dead_letter, "MessageRetentionPeriod", SQS_DEFAULT_RETENTION_SECONDS),
        consumed=consumed,
    )


def _subscription(t: Templates, subscription: Resource, readers: Counter[Resource]) -> Subscription:
    topic = t.target(subscription.stack, subscription.get("TopicArn"), TOPIC)
    endpoint = t.target(subscription.stack, subscription.get("Endpoint"), QUEUE)
    redrive = _redrive(t, subscription)
    dead_letter = redrive["dead_letter"]
    return Subscription(
        **redrive,
        fifo=TOKEN if topic is None else flag(topic.get("FifoTopic")),
        high_throughput=_high_throughput(topic, HIGH_THROUGHPUT_TOPIC),
        protocol=str(subscription.get("Protocol")).lower(),
        raw=flag(subscription.get("RawMessageDelivery")),
        endpoint_consumed=endpoint is not None and readers[endpoint] > 0,
        dead_letter_writable=TOKEN
        if dead_letter is None
        else any(
            _allows(policy, ["sqs:SendMessage"], SNS, lambda s: _from(t, dead_letter.stack, s, topic))
            for policy in _policies(t, dead_letter)
        ),
    )


def _dead_letter_queues(
    t: Templates, redrives: Iterable[Redrive], targets: Iterable[tuple[Resource, Any]]
) -> list[DeadLetterQueue]:
    """Every queue of the app that messages are given up to, and whether an alarm watches it."""
    givers = (*t.of_type(MAPPING), *t.of_type(INVOKE_CONFIG), *t.of_type(FUNCTION))
    pipes = [(pipe, document(pipe.get("SourceParameters"))) for pipe in t.of_type(PIPE)]
    given_up = [
        *((r.stack, r.properties) for r in givers),
        *((pipe.stack, source.get(name)) for pipe, source in pipes for name in PIPE_PARAMETERS.values()),
        *((rule.stack, target) for rule, target in targets),
    ]
    queues = [r.dead_letter for r in redrives]
    queues += [t.target(stack, failure_destination(document(given)), QUEUE) for stack, given in given_up]
    watched = {queue for alarm in t.of_type(ALARM) for queue in _watched_queues(t, alarm)}
    return [DeadLetterQueue(q, q in watched) for q in dict.fromkeys(q for q in queues if q is not None)]


def failure_destination(settings: Mapping[str, Any]) -> Any:
    """Where an event source mapping, an EventInvokeConfig, a function, a pipe's source parameters or a rule's
    target sends what failed: its on-failure destination or its dead-letter queue (None: nowhere)."""
    destination = document(document(settings.get("DestinationConfig")).get("OnFailure")).get("Destination")
    dead_letter = document(settings.get("DeadLetterConfig"))
    return destination or dead_letter.get("Arn") or dead_letter.get("TargetArn")


def _watched_queues(t: Templates, alarm: Resource) -> Iterator[Resource]:
    """The queues whose visible messages an alarm watches, alone or in a metric math expression."""
    metrics = [
        alarm.properties,
        *(document(m.get("MetricStat")).get("Metric") for m in alarm.get("Metrics") or []),
    ]
    for metric in (m for m in metrics if isinstance(m, dict)):
        if (metric.get("Namespace"), metric.get("MetricName")) != DEAD_LETTERS_METRIC:
            continue
        for dimension in metric.get("Dimensions") or []:
            if dimension.get("Name") != "QueueName":
                continue
            value = dimension.get("Value")
            queue = t.target(alarm.stack, value, QUEUE)
            if queue is not None:
                yield queue
            elif isinstance(value, str):  # by the name the template gives the queue
                yield from (q for q in t.of_type(QUEUE) if q.get("QueueName") == value)


def _alarm_topics(t: Templates) -> list[Resource]:
    """The topics of the app that CloudWatch alarms notify."""
    topics = (
        t.target(alarm.stack, action, TOPIC)
        for alarm in (*t.of_type(ALARM), *t.of_type("AWS::CloudWatch::CompositeAlarm"))
        for action in chain.from_iterable(listed(alarm.get(name)) for name in ALARM_ACTIONS)
    )
    return list(dict.fromkeys(topic for topic in topics if topic is not None))


def _alarm_topic(t: Templates, topic: Resource) -> AlarmTopic:
    key_id = topic.get("KmsMasterKeyId")
    key = t.target(topic.stack, key_id, KEY)
    # alias/aws/sns as text, or at the end of an ARN joined from parts
    aws_managed = f'{AWS_MANAGED_SNS_KEY}"' in json.dumps(key_id)
    return AlarmTopic(
        resource=topic,
        policy_allows=all(_allows(p, ["sns:Publish"], CLOUDWATCH) for p in _policies(t, topic)),
        key_allows=not aws_managed
        and (key is None or _allows(key.get("KeyPolicy"), CLOUDWATCH_KEY_ACTIONS, CLOUDWATCH)),
    )


def _policies(t: Templates, resource: Resource) -> list[Any]:
    """The policy documents the app's policy resources give a queue, a topic or a role (:data:`POLICIES`)."""
    return [
        policy.get("PolicyDocument")
        for type_, name in POLICIES[resource.type]
        for policy in t.of_type(type_)
        if any(t.target(policy.stack, value, resource.type) is resource for value in listed(policy.get(name)))
    ]


def _allows(
    policy: Any, actions: Iterable[str], service: str, where: Callable[[Any], bool] = lambda statement: True
) -> bool:
    """Whether a resource policy's Allow statements for AWS service ``service`` (or for everyone) that
    ``where`` accepts let it do all of ``actions``. Resources are not evaluated, conditions only by ``where``:
    the rules look for the statement, not for its scope."""
    granted = [
        pattern.lower()
        for statement in _statements(policy)
        if _service_or_anyone(statement.get("Principal"), service) and where(statement)
        for pattern in listed(statement.get("Action"))
        if isinstance(pattern, str)
    ]
    return all(any(fnmatchcase(action.lower(), pattern) for pattern in granted) for action in actions)


def _statements(policy: Any) -> list[dict[str, Any]]:
    """A policy document's Allow statements."""
    statements = listed(document(policy).get("Statement"))
    return [s for s in statements if isinstance(s, dict) and s.get("Effect") == "Allow"]


def _service_or_anyone(principal: Any, service: str) -> bool:
    if principal == "*":
        return True
    return isinstance(principal, dict) and (
        service in listed(principal.get("Service")) or "*" in listed(principal.get("AWS"))
    )


def _from(t: Templates, stack: str, statement: dict[str, Any], topic: Resource | None) -> bool:
    """Whether a statement's aws:SourceArn, if it has one, may be ``topic``: names no other resource of the
    app."""
    conditions = document(statement.get("Condition")).values()
    arns = [v for c in conditions for k, v in document(c).items() if k.lower() == "aws:sourcearn"]
    named = [found for arn in arns for found in t.referred(stack, arn)]
    return not named or topic in named


def _may_decrypt(t: Templates, queue: Resource | None, role: Resource | None) -> Any:
    """Whether ``role`` may kms:Decrypt with the customer managed key of ``queue`` (the key policy allows the
    role or anyone, or the role's policies allow it on the key): True, False, or TOKEN where the app cannot
    tell (no key of the app, a role from outside it, an ARN it cannot resolve, a managed policy from outside
    it that may allow it)."""
    key = t.target(queue.stack, queue.get("KmsMasterKeyId"), KEY) if queue else None
    if key is None or role is None:
        return TOKEN
    by_key = [
        s
        for s in _statements(key.get("KeyPolicy"))
        if _service_or_anyone(s.get("Principal"), "")
        or role in t.referred(key.stack, list(document(s.get("Principal")).values()))
    ]
    managed = [(arn, t.referred(role.stack, arn)) for arn in listed(role.get("ManagedPolicyArns"))]
    policies = [
        *(document(policy).get("PolicyDocument") for policy in listed(role.get("Policies"))),
        *(policy.get("PolicyDocument") for _, found in managed for policy in found),
        *_policies(t, role),
    ]
    granted = [
        _names(t, role.stack, statement.get("Resource"), key)
        for statement in [*by_key, *(s for policy in policies for s in _statements(policy))]
        if any(fnmatchcase("kms:decrypt", str(action).lower()) for action in listed(statement.get("Action")))
    ]
    foreign = [arn for arn, found in managed if not found]
    unknown = TOKEN in granted or any(all(n not in json.dumps(a) for n in NO_KMS_POLICIES) for a in foreign)
    return True if True in granted else TOKEN if unknown else False


def _names(t: Templates, stack: str, resources: Any, wanted: Resource) -> Any:
    """Whether a statement's Resource covers ``wanted``: True ("*" or a reference to it), False (references
    to other resources of the app only), TOKEN (an ARN the app cannot tell)."""
    values = listed(resources)
    if "*" in values or any(wanted in t.referred(stack, value) for value in values):
        return True
    return False if all(t.referred(stack, value) for value in values) else TOKEN


def _async_functions(
    t: Templates, subscriptions: Iterable[Subscription], targets: Iterable[tuple[Resource, Any]]
) -> list[Delivery]:
    """The functions SNS subscriptions and EventBridge rules invoke (asynchronously)."""
    invoked = [(s.resource.stack, s.resource.get("Endpoint")) for s in subscriptions if s.protocol == LAMBDA]
    invoked += [(rule.stack, target.get("Arn")) for rule, target in targets]
    functions = dict.fromkeys(f for stack, arn in invoked if (f := t.function(stack, arn)) is not None)
    with_destination = {
        t.function(config.stack, config.get("FunctionName"))
        for config in t.of_type(INVOKE_CONFIG)
        if failure_destination(config.properties)
    }
    return [
        Delivery(f, f in with_destination or failure_destination(f.properties) is not None) for f in functions
    ]


def _runtime_consumer(queue: Resource | None, function: Resource | None) -> RuntimeConsumer | None:
    """A function with this library's runtime on a queue of the app: the lifetime of its idempotency
    records (as the runtime reads its environment) and the queue's arrival window (as the constructs'
    short-TTL warning computes it)."""
    if queue is None or function is None:
        return None
    variables = _variables(function)
    try:
        mode = Mode(str(variables.get(contract.IDEMPOTENCY_MODE.name)))
    except ValueError:  # not this library's runtime
        return None
    variable = contract.DOCUMENT_TTL_SECONDS if mode == Mode.DOCUMENT else contract.DEDUP_TTL_SECONDS
    lifetime = number(variables.get(variable.name) or variable.default)
    facts = QueueFacts(
        fifo=None,
        visibility_seconds=known(queue.get("VisibilityTimeout"), SQS_DEFAULT_VISIBILITY_SECONDS),
        retention_seconds=known(queue.get("MessageRetentionPeriod"), SQS_DEFAULT_RETENTION_SECONDS),
        max_receive_count=known(document(queue.get("RedrivePolicy")).get("maxReceiveCount"), None),
    )
    window, _ = consumer.arrival_window(facts)
    return RuntimeConsumer(function, TOKEN if lifetime is None else (lifetime or None), window)


def _variables(function: Resource) -> dict[str, Any]:
    return document(function.get("Environment")).get("Variables") or {}


def _idempotency_stores(t: Templates) -> list[IdempotencyStore]:
    """The tables used for idempotency, with the TTL attribute each one's writer expects (None: unknown)."""
    expected: dict[Resource, str | None] = {}
    for function in t.of_type(FUNCTION):
        variables = _variables(function)
        runtime = contract.IDEMPOTENCY_MODE.name in variables
        for name, value in variables.items():
            table = t.target(function.stack, value, TABLE)
            if table is None:
                continue
            if runtime and name == contract.TABLE_NAME.name:
                attribute = variables.get(contract.TTL_ATTRIBUTE.name) or contract.TTL_ATTRIBUTE.default
                expected[table] = attribute if isinstance(attribute, str) else None
            elif IDEMPOTENCY_MARK in name.lower():
                expected.setdefault(table, None)
    for table in t.of_type(TABLE):
        if IDEMPOTENCY_MARK in f"{table.id} {table.get('TableName')}".lower():
            expected.setdefault(table, None)
    return [IdempotencyStore(table, _ttl_attribute(table), wanted) for table, wanted in expected.items()]


def _ttl_attribute(table: Resource) -> Any:
    specification = table.get("TimeToLiveSpecification")
    if specification is None:
        return None
    enabled = flag(document(specification).get("Enabled"))
    attribute = document(specification).get("AttributeName")
    if enabled is TOKEN or (enabled and not isinstance(attribute, str)):
        return TOKEN
    return attribute if enabled else None
