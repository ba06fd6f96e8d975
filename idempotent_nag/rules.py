"""The rules of :class:`~idempotent_nag.IdempotentPipelineChecks`, as data: what each one finds in an app's
templates, and what it tells the user.

Each rule takes its threshold from where the library declares it: the constructs' modules (the visibility
factor, SQS's defaults, the short-TTL warning's arrival window and comparison) and the runtime contract (the
environment's names and defaults). A value the templates cannot tell (a parameter, an imported resource) is
not a finding.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from itertools import chain
from typing import Any

from cdk_nag import NagMessageLevel
from idempotent_runtime import contract
from idempotent_runtime.contract import Mode

from idempotent_nag.templates import (
    ALARM,
    FUNCTION,
    KEY,
    MAPPING,
    QUEUE,
    SUBSCRIPTION,
    TOPIC,
    Resource,
    Templates,
    document,
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

# CloudFormation's default for a function without Timeout, and for a mapping without a batching window.
LAMBDA_DEFAULT_TIMEOUT_SECONDS = 3
NO_BATCHING_WINDOW = 0
# Subscriptions whose endpoint is part of an application (an email or an SMS subscription is not checked).
PIPELINE_PROTOCOLS = ("sqs", "lambda")
DEAD_LETTERS_METRIC = ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
ALARM_ACTIONS = ("AlarmActions", "OKActions", "InsufficientDataActions")
CLOUDWATCH = "cloudwatch.amazonaws.com"
# What CloudWatch does with a KMS-encrypted alarm topic's key.
CLOUDWATCH_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
AWS_MANAGED_SNS_KEY = "alias/aws/sns"


@dataclass(frozen=True)
class NagRule:
    """One check: ``find(templates)`` yields the resources that break it; ``info`` says what is wrong with
    such a resource and what fixes it, ``explanation`` why it matters (shown with ``verbose=True``)."""

    id: str
    level: NagMessageLevel
    info: str
    explanation: str
    find: Callable[[Templates], Iterable[Resource]]


# -- what the templates say -----------------------------------------------------------------------------


def sqs_mappings(t: Templates) -> Iterator[tuple[Resource, Resource | None, Resource | None]]:
    """Each event source mapping that reads SQS, with its queue and its function where the app has them."""
    for mapping in t.of_type(MAPPING):
        source = mapping.get("EventSourceArn")
        queue = t.target(mapping.stack, source, QUEUE)
        if queue is None and ":sqs:" not in json.dumps(source):  # an imported queue's ARN, or not SQS
            continue
        name = mapping.get("FunctionName")
        function = t.target(mapping.stack, name, FUNCTION)
        for version_or_alias in ("AWS::Lambda::Version", "AWS::Lambda::Alias"):
            pointer = t.target(mapping.stack, name, version_or_alias)
            if pointer is not None:
                function = t.target(pointer.stack, pointer.get("FunctionName"), FUNCTION)
        yield mapping, queue, function


def known(value: Any, default: int | None) -> Any:
    """A number from a template: ``default`` when it is not set, TOKEN when the template cannot say."""
    if value is None:
        return default
    found = number(value)
    return TOKEN if found is None else found


def dead_letter_queue(t: Templates, source: Resource) -> Resource | None:
    """The queue a queue's or a subscription's RedrivePolicy sends to."""
    return t.target(source.stack, document(source.get("RedrivePolicy")).get("deadLetterTargetArn"), QUEUE)


def fifo(t: Templates, resource: Resource) -> bool | None:
    """A queue's type, or a subscription's topic's; None when the topic is not in the app."""
    if resource.type == SUBSCRIPTION:
        topic = t.target(resource.stack, resource.get("TopicArn"), TOPIC)
        return None if topic is None else str(topic.get("FifoTopic")).lower() == "true"
    return str(resource.get("FifoQueue")).lower() == "true"


def queue_facts(queue: Resource) -> QueueFacts:
    return QueueFacts(
        fifo=None,
        visibility_seconds=known(queue.get("VisibilityTimeout"), SQS_DEFAULT_VISIBILITY_SECONDS),
        retention_seconds=known(queue.get("MessageRetentionPeriod"), SQS_DEFAULT_RETENTION_SECONDS),
        max_receive_count=known(document(queue.get("RedrivePolicy")).get("maxReceiveCount"), None),
    )


def watched_queues(t: Templates, alarm: Resource) -> Iterator[Resource]:
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


def alarm_topics(t: Templates) -> list[Resource]:
    """The topics of the app that CloudWatch alarms notify."""
    topics = (
        t.target(alarm.stack, action, TOPIC)
        for alarm in (*t.of_type(ALARM), *t.of_type("AWS::CloudWatch::CompositeAlarm"))
        for action in chain.from_iterable(listed(alarm.get(name)) for name in ALARM_ACTIONS)
    )
    return list(dict.fromkeys(topic for topic in topics if topic is not None))


def allows_cloudwatch(policy: Any, actions: Iterable[str]) -> bool:
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


# -- the rules ------------------------------------------------------------------------------------------


def without_partial_batch_responses(t: Templates) -> Iterator[Resource]:
    for mapping, _, _ in sqs_mappings(t):
        if "ReportBatchItemFailures" not in listed(mapping.get("FunctionResponseTypes")):
            yield mapping


def short_visibility_timeouts(t: Templates) -> Iterator[Resource]:
    for mapping, queue, function in sqs_mappings(t):
        if queue is None or function is None:
            continue
        visibility = known(queue.get("VisibilityTimeout"), SQS_DEFAULT_VISIBILITY_SECONDS)
        timeout = known(function.get("Timeout"), LAMBDA_DEFAULT_TIMEOUT_SECONDS)
        window = known(mapping.get("MaximumBatchingWindowInSeconds"), NO_BATCHING_WINDOW)
        if TOKEN in (visibility, timeout, window):
            continue
        if visibility < consumer.needed_visibility(timeout, window):
            yield mapping


def mismatched_dead_letter_queues(t: Templates) -> Iterator[Resource]:
    for source in (*t.of_type(QUEUE), *t.of_type(SUBSCRIPTION)):
        dlq = dead_letter_queue(t, source)
        kind = fifo(t, source)
        if dlq is not None and kind is not None and kind != fifo(t, dlq):
            yield source


def subscriptions_without_dead_letter_queue(t: Templates) -> Iterator[Resource]:
    for subscription in t.of_type(SUBSCRIPTION):
        protocol = str(subscription.get("Protocol")).lower()
        if protocol in PIPELINE_PROTOCOLS and not subscription.get("RedrivePolicy"):
            yield subscription


def dead_letter_queues_without_alarm(t: Templates) -> list[Resource]:
    sources = (*t.of_type(QUEUE), *t.of_type(SUBSCRIPTION))
    dead_letter_queues = dict.fromkeys(q for q in (dead_letter_queue(t, s) for s in sources) if q is not None)
    watched = {queue for alarm in t.of_type(ALARM) for queue in watched_queues(t, alarm)}
    return [queue for queue in dead_letter_queues if queue not in watched]


def alarm_topics_cloudwatch_cannot_publish_to(t: Templates) -> Iterator[Resource]:
    """A topic without a policy has SNS's default one, which lets CloudWatch alarms of its account publish."""
    for topic in alarm_topics(t):
        policies = [
            policy
            for policy in t.of_type("AWS::SNS::TopicPolicy")
            if any(t.target(policy.stack, ref, TOPIC) is topic for ref in listed(policy.get("Topics")))
        ] + [
            policy
            for policy in t.of_type("AWS::SNS::TopicInlinePolicy")
            if t.target(policy.stack, policy.get("TopicArn"), TOPIC) is topic
        ]
        if any(not allows_cloudwatch(p.get("PolicyDocument"), ["sns:Publish"]) for p in policies):
            yield topic


def alarm_topics_whose_key_cloudwatch_cannot_use(t: Templates) -> Iterator[Resource]:
    for topic in alarm_topics(t):
        key_id = topic.get("KmsMasterKeyId")
        key = t.target(topic.stack, key_id, KEY)
        # alias/aws/sns as text, or at the end of an ARN joined from parts
        if f'{AWS_MANAGED_SNS_KEY}"' in json.dumps(key_id) or (
            key is not None and not allows_cloudwatch(key.get("KeyPolicy"), CLOUDWATCH_KEY_ACTIONS)
        ):
            yield topic


def short_idempotency_lifetimes(t: Templates) -> Iterator[Resource]:
    """Functions with the runtime's environment whose lifetime is shorter than a queue's arrival window, as
    the constructs' short-TTL warning computes both."""
    for _, queue, function in sqs_mappings(t):
        if queue is None or function is None:
            continue
        variables = document(function.get("Environment")).get("Variables") or {}
        try:
            mode = Mode(str(variables.get(contract.IDEMPOTENCY_MODE.name)))
        except ValueError:  # not this library's runtime
            continue
        variable = contract.DOCUMENT_TTL_SECONDS if mode == Mode.DOCUMENT else contract.DEDUP_TTL_SECONDS
        lifetime = number(variables.get(variable.name) or variable.default)
        if lifetime is None:
            continue
        window, _ = consumer.arrival_window(queue_facts(queue))
        if window is not TOKEN and consumer.short_lifetime(lifetime or None, window):
            yield function


RULES: tuple[NagRule, ...] = (
    NagRule(
        "PartialBatchResponses",
        NagMessageLevel.ERROR,
        "The SQS event source mapping does not report batch item failures: add ReportBatchItemFailures "
        "to its FunctionResponseTypes (CDK: SqsEventSource(report_batch_item_failures=True)) and have the "
        "function return the ids of the records that failed.",
        "Without partial batch responses one failed record fails its whole batch: the records that "
        "succeeded are delivered and processed again, and a record that keeps failing takes its batch "
        "neighbours to the dead-letter queue.",
        without_partial_batch_responses,
    ),
    NagRule(
        "VisibilityTimeout",
        NagMessageLevel.ERROR,
        "The visibility timeout of the SQS event source mapping's queue is under "
        f"{consumer.VISIBILITY_FACTOR} x the function's timeout + the mapping's "
        "MaximumBatchingWindowInSeconds: raise the queue's VisibilityTimeout to at least that (or lower "
        "the function's timeout or the batching window).",
        "AWS guidance for Lambda with SQS: a visibility timeout of at least 6 times the function timeout, "
        "so a message is not delivered again while retries of its batch still run; the event source also "
        "holds received (already invisible) messages for up to the batching window before it invokes.",
        short_visibility_timeouts,
    ),
    NagRule(
        "DeadLetterQueueType",
        NagMessageLevel.ERROR,
        "The dead-letter queue in this RedrivePolicy is not of the type of the queue (of the topic, for a "
        "subscription): a FIFO queue or topic needs a FIFO dead-letter queue, a standard one a standard "
        "queue.",
        "SQS refuses a dead-letter queue of the other type when the stack deploys (synth only warns), and "
        "SNS uses FIFO dead-letter queues for FIFO topics' subscriptions, standard ones for standard "
        "topics'.",
        mismatched_dead_letter_queues,
    ),
    NagRule(
        "SubscriptionDeadLetterQueue",
        NagMessageLevel.ERROR,
        "The SNS subscription (protocol " + " or ".join(PIPELINE_PROTOCOLS) + ") has no dead-letter "
        "queue: give it a RedrivePolicy with a deadLetterTargetArn (CDK: dead_letter_queue=...) whose "
        "queue policy lets SNS send from the topic.",
        "SNS drops a message it cannot deliver because of a client-side error (a deleted endpoint, a "
        "queue policy or key SNS cannot use) or after its last retry, unless the subscription has a "
        "dead-letter queue.",
        subscriptions_without_dead_letter_queue,
    ),
    NagRule(
        "DeadLetterQueueAlarm",
        NagMessageLevel.WARN,
        "This queue is a dead-letter queue (a queue's or an SNS subscription's RedrivePolicy names it) "
        "and no CloudWatch alarm watches its AWS/SQS ApproximateNumberOfMessagesVisible: add one with a "
        "threshold of 1, on the metric or in a metric math expression.",
        "A message in a dead-letter queue was given up on; without an alarm it waits there unseen until "
        "its retention period ends and SQS deletes it.",
        dead_letter_queues_without_alarm,
    ),
    NagRule(
        "AlarmTopicPolicy",
        NagMessageLevel.ERROR,
        "CloudWatch alarms notify this SNS topic, and its topic policy has no statement allowing "
        f'{{"Service": "{CLOUDWATCH}"}} sns:Publish: add one (conditions aws:SourceAccount, and '
        "aws:SourceArn arn:<partition>:cloudwatch:<region>:<account>:alarm:*).",
        "A topic policy replaces SNS's default one, which lets principals of the topic owner's account "
        "publish (aws:SourceOwner), CloudWatch alarms of that account included; without the statement "
        "every alarm action fails and alarms fire unseen.",
        alarm_topics_cloudwatch_cannot_publish_to,
    ),
    NagRule(
        "AlarmTopicKey",
        NagMessageLevel.ERROR,
        "CloudWatch alarms notify this SNS topic, and the policy of its KMS key does not allow "
        f'{{"Service": "{CLOUDWATCH}"}} kms:Decrypt and kms:GenerateDataKey*: add that statement to the '
        f"key policy (the AWS managed key {AWS_MANAGED_SNS_KEY} cannot take it: use a customer managed "
        "key).",
        "CloudWatch encrypts each notification with the topic's key; without these actions every alarm "
        "action fails and alarms fire unseen.",
        alarm_topics_whose_key_cloudwatch_cannot_use,
    ),
    NagRule(
        "DedupLifetime",
        NagMessageLevel.WARN,
        "The function runs the idempotent-pipeline runtime, and its idempotency records "
        f"({contract.DOCUMENT_TTL_SECONDS.name} in document mode, {contract.DEDUP_TTL_SECONDS.name} "
        "otherwise) expire before a duplicate can no longer arrive from its SQS queue (the queue's "
        "retention, or maxReceiveCount x visibility timeout if longer): make the lifetime at least that, "
        f"or {contract.NEVER} (never expire).",
        "A redelivery that arrives after its record expired is processed again.",
        short_idempotency_lifetimes,
    ),
)


def findings(t: Templates) -> dict[tuple[str, str], list[NagRule]]:
    """(stack construct path, logical id) -> the rules the resource breaks."""
    found: dict[tuple[str, str], list[NagRule]] = {}
    for rule in RULES:
        for resource in dict.fromkeys(rule.find(t)):
            found.setdefault((resource.stack, resource.id), []).append(rule)
    return found
