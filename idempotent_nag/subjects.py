"""What the rules look at: an app's templates read as subjects, each a frozen dataclass of plain values (an
event source mapping with what it reads and invokes, a queue or a subscription with its dead-letter queue,
a dead-letter queue and whether an alarm watches it, ...).

A setting a template leaves out takes the service's default. A value the templates cannot tell (a
parameter, a resource imported from outside the app) is TOKEN: a rule whose condition reads it is skipped
(``idempotent_pipeline._rules.holds``), never guessed at.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
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
    QUEUE,
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

SQS, DYNAMODB, KINESIS = "sqs", "dynamodb", "kinesis"
STREAMS = (DYNAMODB, KINESIS)
# What an event source mapping reads, by the type of the resource its EventSourceArn names, or by the
# service in an ARN from outside the app.
SOURCE_TYPES = {
    QUEUE: SQS,
    TABLE: DYNAMODB,
    "AWS::Kinesis::Stream": KINESIS,
    "AWS::Kinesis::StreamConsumer": KINESIS,
}
# Lambda's defaults: BatchSize per source, a function's Timeout, no batching window, and -1 (retry until
# the record expires) for a stream mapping's MaximumRetryAttempts and MaximumRecordAgeInSeconds.
DEFAULT_BATCH_SIZE = {SQS: 10, DYNAMODB: 100, KINESIS: 100}
LAMBDA_DEFAULT_TIMEOUT_SECONDS = 3
UNBOUNDED = -1
# SQS and SNS settings of a FIFO queue or topic with high throughput.
HIGH_THROUGHPUT_QUEUE = {"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}
HIGH_THROUGHPUT_TOPIC = {"FifoThroughputScope": "MessageGroup"}
# Subscriptions whose endpoint is part of an application (an email or an SMS subscription is not checked).
PIPELINE_PROTOCOLS = ("sqs", "lambda")
DEAD_LETTERS_METRIC = ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
ALARM_ACTIONS = ("AlarmActions", "OKActions", "InsufficientDataActions")
CLOUDWATCH = "cloudwatch.amazonaws.com"
# What CloudWatch does with a KMS-encrypted alarm topic's key.
CLOUDWATCH_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
AWS_MANAGED_SNS_KEY = "alias/aws/sns"
# A table is an idempotency store when this library's runtime names it (TABLE_NAME), or when an environment
# variable or the table's own name or id says so (Powertools' examples: IDEMPOTENCY_TABLE).
IDEMPOTENCY_MARK = "idempoten"


# -- subjects -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventSource:
    """An event source mapping, with what the app says about its source and its function."""

    resource: Resource
    kind: str | None  # SQS, DYNAMODB, KINESIS, or None (another source)
    batch_size: Any
    reports_failures: Any
    window: Any  # MaximumBatchingWindowInSeconds
    visibility: Any  # the SQS queue's visibility timeout
    timeout: Any  # the function's
    reserved: Any  # the function's reserved concurrency (None: not set)
    max_concurrency: Any  # ScalingConfig.MaximumConcurrency (None: not set)
    filtered: bool
    shared: bool  # another mapping of the app reads the same queue
    has_failure_destination: bool  # DestinationConfig.OnFailure names a destination
    retries: Any  # MaximumRetryAttempts (UNBOUNDED: until the record expires)
    max_age: Any  # MaximumRecordAgeInSeconds


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
    consumed: bool  # an event source mapping of the app reads it


@dataclass(frozen=True)
class Subscription(Redrive):
    protocol: str
    raw: Any  # RawMessageDelivery
    endpoint_consumed: bool  # its endpoint is a queue an event source mapping of the app reads


@dataclass(frozen=True)
class DeadLetterQueue:
    """A queue something of the app gives up messages to: a RedrivePolicy, an on-failure destination, a
    function's dead-letter queue."""

    resource: Resource
    watched: bool  # an alarm watches its visible messages


@dataclass(frozen=True)
class AlarmTopic:
    resource: Resource
    policy_allows: bool  # every topic policy lets CloudWatch publish (no policy: SNS's default one does)
    key_allows: bool  # CloudWatch may use its KMS key (no key: nothing to allow)


@dataclass(frozen=True)
class AsyncFunction:
    """A function an SNS subscription invokes (asynchronously)."""

    resource: Resource
    has_failure_destination: bool  # a DeadLetterConfig, or an EventInvokeConfig with OnFailure


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
        self._sources = [(m, *_source_of(t, m), _function_of(t, m)) for m in t.of_type(MAPPING)]
        readers = Counter(queue for _, kind, queue, _ in self._sources if kind == SQS and queue is not None)
        self.event_sources = [_event_source(m, kind, q, f, readers) for m, kind, q, f in self._sources]
        self.queues = [_queue(t, q, consumed=readers[q] > 0) for q in t.of_type(QUEUE)]
        self.subscriptions = [_subscription(t, s, readers) for s in t.of_type(SUBSCRIPTION)]
        self.redrives: list[Redrive] = [*self.queues, *self.subscriptions]
        self.dead_letter_queues = _dead_letter_queues(t, self.redrives)
        self.alarm_topics = [_alarm_topic(t, topic) for topic in _alarm_topics(t)]
        self.async_functions = _async_functions(t, self.subscriptions)
        self.runtime_consumers = [
            c for c in (_runtime_consumer(q, f) for _, kind, q, f in self._sources if kind == SQS) if c
        ]
        self.idempotency_stores = _idempotency_stores(t)


def _source_of(t: Templates, mapping: Resource) -> tuple[str | None, Resource | None]:
    """What a mapping reads (SQS, DYNAMODB, KINESIS or None) and, for a queue of the app, the queue."""
    arn = mapping.get("EventSourceArn")
    for type_, kind in SOURCE_TYPES.items():
        found = t.target(mapping.stack, arn, type_)
        if found is not None:
            return kind, found if type_ == QUEUE else None
    text = json.dumps(arn)  # an ARN from outside the app, as text or joined from parts
    return next((kind for kind in (SQS, DYNAMODB, KINESIS) if f":{kind}:" in text), None), None


def _function_of(t: Templates, mapping: Resource) -> Resource | None:
    """The function a mapping (or a subscription, by its endpoint) invokes, through a version or alias."""
    name = mapping.get("FunctionName") or mapping.get("Endpoint")
    for pointer_type in ("AWS::Lambda::Version", "AWS::Lambda::Alias"):
        pointer = t.target(mapping.stack, name, pointer_type)
        if pointer is not None:
            return t.target(pointer.stack, pointer.get("FunctionName"), FUNCTION)
    return t.target(mapping.stack, name, FUNCTION)


def _event_source(
    mapping: Resource,
    kind: str | None,
    queue: Resource | None,
    function: Resource | None,
    readers: Counter[Resource],
) -> EventSource:
    get = mapping.get
    return EventSource(
        resource=mapping,
        kind=kind,
        batch_size=known(get("BatchSize"), DEFAULT_BATCH_SIZE.get(kind or "", TOKEN)),
        reports_failures="ReportBatchItemFailures" in listed(get("FunctionResponseTypes")),
        window=known(get("MaximumBatchingWindowInSeconds"), 0),
        visibility=_of(queue, "VisibilityTimeout", SQS_DEFAULT_VISIBILITY_SECONDS),
        timeout=_of(function, "Timeout", LAMBDA_DEFAULT_TIMEOUT_SECONDS),
        reserved=_of(function, "ReservedConcurrentExecutions", None),
        max_concurrency=known(document(get("ScalingConfig")).get("MaximumConcurrency"), None),
        filtered=bool(document(get("FilterCriteria")).get("Filters")),
        shared=queue is not None and readers[queue] > 1,
        has_failure_destination=failure_destination(mapping) is not None,
        retries=known(get("MaximumRetryAttempts"), UNBOUNDED),
        max_age=known(get("MaximumRecordAgeInSeconds"), UNBOUNDED),
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
    return Subscription(
        **_redrive(t, subscription),
        fifo=TOKEN if topic is None else flag(topic.get("FifoTopic")),
        high_throughput=_high_throughput(topic, HIGH_THROUGHPUT_TOPIC),
        protocol=str(subscription.get("Protocol")).lower(),
        raw=flag(subscription.get("RawMessageDelivery")),
        endpoint_consumed=endpoint is not None and readers[endpoint] > 0,
    )


def _dead_letter_queues(t: Templates, redrives: Iterable[Redrive]) -> list[DeadLetterQueue]:
    """Every queue of the app that messages are given up to, and whether an alarm watches it."""
    queues = [r.dead_letter for r in redrives]
    for resource in (*t.of_type(MAPPING), *t.of_type(INVOKE_CONFIG)):
        queues.append(t.target(resource.stack, failure_destination(resource), QUEUE))
    for function in t.of_type(FUNCTION):
        target = document(function.get("DeadLetterConfig")).get("TargetArn")
        queues.append(t.target(function.stack, target, QUEUE))
    watched = {queue for alarm in t.of_type(ALARM) for queue in _watched_queues(t, alarm)}
    return [DeadLetterQueue(q, q in watched) for q in dict.fromkeys(q for q in queues if q is not None)]


def failure_destination(resource: Resource) -> Any:
    """The on-failure destination of an event source mapping or an EventInvokeConfig (None: none)."""
    return document(document(resource.get("DestinationConfig")).get("OnFailure")).get("Destination")


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
    policies = [
        policy
        for policy in t.of_type("AWS::SNS::TopicPolicy")
        if any(t.target(policy.stack, ref, TOPIC) is topic for ref in listed(policy.get("Topics")))
    ] + [
        policy
        for policy in t.of_type("AWS::SNS::TopicInlinePolicy")
        if t.target(policy.stack, policy.get("TopicArn"), TOPIC) is topic
    ]
    key_id = topic.get("KmsMasterKeyId")
    key = t.target(topic.stack, key_id, KEY)
    # alias/aws/sns as text, or at the end of an ARN joined from parts
    aws_managed = f'{AWS_MANAGED_SNS_KEY}"' in json.dumps(key_id)
    return AlarmTopic(
        resource=topic,
        policy_allows=all(_allows_cloudwatch(p.get("PolicyDocument"), ["sns:Publish"]) for p in policies),
        key_allows=not aws_managed
        and (key is None or _allows_cloudwatch(key.get("KeyPolicy"), CLOUDWATCH_KEY_ACTIONS)),
    )


def _allows_cloudwatch(policy: Any, actions: Iterable[str]) -> bool:
    """Whether a policy document's Allow statements let CloudWatch (or everyone) do all of ``actions``.

    Conditions and resources are not evaluated: the rules look for the statement, not for its scope.
    """
    granted = [
        pattern.lower()
        for statement in listed(document(policy).get("Statement"))
        if isinstance(statement, dict)
        and statement.get("Effect") == "Allow"
        and _cloudwatch_or_anyone(statement.get("Principal"))
        for pattern in listed(statement.get("Action"))
        if isinstance(pattern, str)
    ]
    return all(any(fnmatchcase(action.lower(), pattern) for pattern in granted) for action in actions)


def _cloudwatch_or_anyone(principal: Any) -> bool:
    if principal == "*":
        return True
    return isinstance(principal, dict) and (
        CLOUDWATCH in listed(principal.get("Service")) or "*" in listed(principal.get("AWS"))
    )


def _async_functions(t: Templates, subscriptions: Iterable[Subscription]) -> list[AsyncFunction]:
    functions = dict.fromkeys(
        f for s in subscriptions if s.protocol == "lambda" and (f := _function_of(t, s.resource)) is not None
    )
    with_destination = {
        t.target(config.stack, config.get("FunctionName"), FUNCTION)
        for config in t.of_type(INVOKE_CONFIG)
        if failure_destination(config)
    }
    return [
        AsyncFunction(f, f in with_destination or bool(document(f.get("DeadLetterConfig")).get("TargetArn")))
        for f in functions
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
