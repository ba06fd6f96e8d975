"""The rules of :class:`~idempotent_nag.IdempotentPipelineChecks`, as data: for each, the subjects it checks
(:mod:`.subjects`), the condition that breaks it, where the finding goes, what it tells the user, and the AWS
page it comes from.

Levels follow the harm: ERROR for a configuration that loses or doubles messages, WARNING for one that
stalls them, sets them aside unprocessed, fails the deploy or leaves a failure unseen. A condition that
reads a value the templates cannot tell is skipped (``idempotent_pipeline._rules.holds``). Thresholds come
from where the library declares them: the constructs (the visibility factor, SQS's defaults, the short-TTL
warning's comparison, AWS's receive count) and the runtime contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from cdk_nag import NagMessageLevel
from idempotent_runtime import contract

from idempotent_nag.subjects import (
    AWS_MANAGED_SNS_KEY,
    CLOUDWATCH,
    PIPELINE_PROTOCOLS,
    SQS,
    STREAMS,
    UNBOUNDED,
    Subjects,
)
from idempotent_nag.templates import Resource, Templates
from idempotent_pipeline import consumer
from idempotent_pipeline._facts import (
    LAMBDA_MIN_MAX_RECEIVE_COUNT,
    dead_letter_expires_early,
    expires_before_dead_letter,
)
from idempotent_pipeline._rules import holds

S = TypeVar("S")
ERROR, WARNING = NagMessageLevel.ERROR, NagMessageLevel.WARN

LAMBDA = "https://docs.aws.amazon.com/lambda/latest/dg/"
SQS_GUIDE = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/"
SNS_GUIDE = "https://docs.aws.amazon.com/sns/latest/dg/"


@dataclass(frozen=True)
class NagRule(Generic[S]):
    """One check: each subject ``subjects(app)`` yields for which ``condition`` holds breaks the rule, and
    is reported on ``reported(subject)``. ``info`` says what is wrong and what fixes it, ``explanation``
    why it matters (shown with ``verbose=True``), ``sources`` the AWS pages it comes from."""

    id: str
    level: NagMessageLevel
    subjects: Callable[[Subjects], Iterable[S]]
    condition: Callable[[S], object]
    info: str
    explanation: str
    sources: tuple[str, ...]
    reported: Callable[[S], Resource | None] = lambda subject: subject.resource  # type: ignore[attr-defined]


def _event_sources(app: Subjects) -> Iterable[Any]:
    return app.event_sources


def _queues(app: Subjects) -> Iterable[Any]:
    return app.queues


def _subscriptions(app: Subjects) -> Iterable[Any]:
    return app.subscriptions


def _redrives(app: Subjects) -> Iterable[Any]:
    return app.redrives


RULES: tuple[NagRule[Any], ...] = (
    # -- ERROR: messages lost or processed twice --------------------------------------------------------
    NagRule(
        "PartialBatchResponses",
        ERROR,
        _event_sources,
        lambda s: s.kind in (SQS, *STREAMS) and not s.reports_failures and s.batch_size > 1,
        "The event source mapping (SQS, DynamoDB or Kinesis, batch size above 1) does not report batch item "
        "failures: add ReportBatchItemFailures to its FunctionResponseTypes (CDK: report_batch_item_failures="
        "True) and have the function return the ids of the records that failed (or set the batch size to 1).",
        "Without partial batch responses one failed record fails its whole batch: the records that "
        "succeeded are delivered and processed again, and a record that keeps failing takes its batch "
        "neighbours to the dead-letter queue or the on-failure destination.",
        (f"{LAMBDA}services-sqs-errorhandling.html", f"{LAMBDA}services-ddb-batchfailurereporting.html"),
    ),
    NagRule(
        "VisibilityTimeout",
        ERROR,
        _event_sources,
        lambda s: s.kind == SQS and s.visibility < consumer.needed_visibility(s.timeout, s.window),
        "The visibility timeout of the SQS event source mapping's queue is under "
        f"{consumer.VISIBILITY_FACTOR} x the function's timeout + the mapping's "
        "MaximumBatchingWindowInSeconds: raise the queue's VisibilityTimeout to at least that (or lower "
        "the function's timeout or the batching window).",
        "AWS guidance for Lambda with SQS: a visibility timeout of at least 6 times the function timeout, "
        "so a message is not delivered again while retries of its batch still run; the event source also "
        "holds received (already invisible) messages for up to the batching window before it invokes.",
        (f"{LAMBDA}services-sqs-configure.html",),
    ),
    NagRule(
        "QueueDeadLetterQueue",
        ERROR,
        _queues,
        lambda s: s.consumed and not s.has_dead_letter,
        "A Lambda event source mapping reads this queue and it has no dead-letter queue: give it a "
        "RedrivePolicy (CDK: dead_letter_queue=sqs.DeadLetterQueue(queue=..., max_receive_count="
        f"{LAMBDA_MIN_MAX_RECEIVE_COUNT})).",
        "A message the function cannot process is received again and again until the queue's retention "
        "ends and SQS deletes it (on a FIFO queue it also holds back its message group until then).",
        (f"{SQS_GUIDE}sqs-dead-letter-queues.html", f"{LAMBDA}services-sqs-configure.html"),
    ),
    NagRule(
        "ExpiresBeforeDeadLetter",
        ERROR,
        _queues,
        lambda s: (
            s.has_dead_letter
            and s.max_receive_count is not None
            and expires_before_dead_letter(s.retention, s.max_receive_count, s.visibility)
        ),
        "The queue's MessageRetentionPeriod is shorter than maxReceiveCount x VisibilityTimeout: raise the "
        "retention (or lower the receives or the visibility timeout) so that a message that keeps failing "
        "reaches the dead-letter queue.",
        "SQS deletes a message when the queue's retention ends and never moves an expired message to the "
        "dead-letter queue: a message that keeps failing is deleted before its last receive.",
        ("https://docs.aws.amazon.com/lambda/latest/operatorguide/sqs-retries.html",),
    ),
    NagRule(
        "DeadLetterQueueRetention",
        ERROR,
        _queues,
        lambda s: dead_letter_expires_early(s.fifo, s.dead_letter_retention, s.retention),
        "This dead-letter queue of a standard queue keeps messages for less time than the queue it serves: "
        "make its MessageRetentionPeriod at least the source queue's (14 days, the longest, is usual).",
        "On a standard queue a message keeps its enqueue time when SQS moves it to the dead-letter queue: "
        "one that spent longer in the source queue than the dead-letter queue keeps messages is deleted "
        "early, or at once.",
        (f"{SQS_GUIDE}setting-up-dead-letter-queue-retention.html",),
        reported=lambda s: s.dead_letter,
    ),
    NagRule(
        "SubscriptionDeadLetterQueue",
        ERROR,
        _subscriptions,
        lambda s: s.protocol in PIPELINE_PROTOCOLS and not s.has_dead_letter,
        "The SNS subscription (protocol " + " or ".join(PIPELINE_PROTOCOLS) + ") has no dead-letter "
        "queue: give it a RedrivePolicy with a deadLetterTargetArn (CDK: dead_letter_queue=...) whose "
        "queue policy lets SNS send from the topic.",
        "SNS drops a message it cannot deliver because of a client-side error (a deleted endpoint, a "
        "queue policy or key SNS cannot use) or after its last retry, unless the subscription has a "
        "dead-letter queue.",
        (f"{SNS_GUIDE}sns-dead-letter-queues.html",),
    ),
    NagRule(
        "StreamFailureDestination",
        ERROR,
        _event_sources,
        lambda s: s.kind in STREAMS and not s.has_failure_destination,
        "The DynamoDB or Kinesis event source mapping has no on-failure destination: give it one (CDK: "
        "on_failure=SqsDlq(queue)) and bound its retries (retry_attempts, max_record_age).",
        "When a batch keeps failing, Lambda retries it until the records expire or the retry limits are "
        "reached, then discards them and moves on: without a destination nothing says which records were "
        "skipped.",
        (f"{LAMBDA}services-dynamodb-errors.html", f"{LAMBDA}kinesis-on-failure-destination.html"),
    ),
    NagRule(
        "AsyncFailureDestination",
        ERROR,
        lambda app: app.async_functions,
        lambda s: not s.has_failure_destination,
        "An SNS subscription invokes this function (asynchronously) and it has neither an on-failure "
        "destination nor a dead-letter queue: add one (CDK: on_failure=SqsDestination(queue), or "
        "dead_letter_queue=queue).",
        "Lambda retries a failed asynchronous invocation twice, then discards the event; the "
        "subscription's dead-letter queue only holds what SNS could not hand to Lambda.",
        (f"{LAMBDA}invocation-async-error-handling.html", f"{LAMBDA}invocation-async-retain-records.html"),
    ),
    NagRule(
        "FilteredSharedQueue",
        ERROR,
        _event_sources,
        lambda s: s.kind == SQS and s.filtered and s.shared,
        "This SQS event source mapping filters its messages and another mapping reads the same queue: "
        "give each function its own queue (an SNS subscription with a filter policy per queue, for "
        "instance).",
        "Lambda deletes an SQS message that does not match a mapping's filter: a message meant for the "
        "other function is deleted whenever this mapping receives it first.",
        (f"{LAMBDA}invocation-eventfiltering.html",),
    ),
    NagRule(
        "DedupLifetime",
        ERROR,
        lambda app: app.runtime_consumers,
        lambda s: consumer.short_lifetime(s.lifetime, s.arrival_window),
        "The function runs the idempotent-pipeline runtime, and its idempotency records "
        f"({contract.DOCUMENT_TTL_SECONDS.name} in document mode, {contract.DEDUP_TTL_SECONDS.name} "
        "otherwise) expire before a duplicate can no longer arrive from its SQS queue (the queue's "
        "retention, or maxReceiveCount x visibility timeout if longer): make the lifetime at least that, "
        f"or {contract.NEVER} (never expire).",
        "SQS delivers at least once: a redelivery that arrives after its record expired is processed again.",
        (f"{SQS_GUIDE}standard-queues-at-least-once-delivery.html",),
    ),
    # -- WARNING: messages stalled, set aside unprocessed, refused at deploy, or failures unseen -------
    NagRule(
        "MaxReceiveCount",
        WARNING,
        _queues,
        lambda s: (
            s.consumed
            and s.max_receive_count is not None
            and s.max_receive_count < LAMBDA_MIN_MAX_RECEIVE_COUNT
        ),
        f"A Lambda event source mapping reads this queue and its maxReceiveCount is under "
        f"{LAMBDA_MIN_MAX_RECEIVE_COUNT}: raise it to at least {LAMBDA_MIN_MAX_RECEIVE_COUNT}.",
        "Receives the poller loses to throttling count toward maxReceiveCount: with few of them a message "
        "reaches the dead-letter queue without being processed.",
        (f"{LAMBDA}services-sqs-configure.html",),
    ),
    NagRule(
        "ReservedConcurrency",
        WARNING,
        _event_sources,
        lambda s: (
            s.kind == SQS
            and s.reserved is not None
            and (s.max_concurrency is None or s.max_concurrency > s.reserved)
        ),
        "The function this SQS event source mapping invokes has reserved concurrency, and the mapping's "
        "maximum concurrency is unset or above it: set the mapping's ScalingConfig.MaximumConcurrency "
        "(CDK: max_concurrency) to at most the reserved concurrency.",
        "The SQS poller does not account for reserved concurrency: it receives more messages than the "
        "function may run, the invocations are throttled, and the receives count toward maxReceiveCount, "
        "so messages reach the dead-letter queue unprocessed.",
        ("https://repost.aws/knowledge-center/lambda-sqs-scaling", f"{LAMBDA}services-sqs-scaling.html"),
    ),
    NagRule(
        "DeadLetterQueueType",
        WARNING,
        _redrives,
        lambda s: s.fifo != s.dead_letter_fifo,
        "The dead-letter queue in this RedrivePolicy is not of the type of the queue (of the topic, for a "
        "subscription): a FIFO queue or topic needs a FIFO dead-letter queue, a standard one a standard "
        "queue.",
        "SQS refuses a dead-letter queue of the other type when the stack deploys (synth only warns), and "
        "SNS uses FIFO dead-letter queues for FIFO topics' subscriptions, standard ones for standard "
        "topics'.",
        (f"{SQS_GUIDE}sqs-dead-letter-queues.html", f"{SNS_GUIDE}sns-dead-letter-queues.html"),
    ),
    NagRule(
        "HighThroughputDeadLetterQueue",
        WARNING,
        _redrives,
        lambda s: s.high_throughput and s.dead_letter_fifo and not s.dead_letter_high_throughput,
        "The queue (or the subscription's topic) has high-throughput FIFO settings and its FIFO "
        "dead-letter queue does not: give the dead-letter queue DeduplicationScope messageGroup and "
        "FifoThroughputLimit perMessageGroupId too.",
        "A FIFO queue without both settings runs at normal FIFO throughput and deduplicates across the "
        "whole queue: a burst of dead letters, or a redrive back at the source's rate, is throttled there.",
        (f"{SQS_GUIDE}enable-high-throughput-fifo.html",),
    ),
    NagRule(
        "RawMessageDelivery",
        WARNING,
        _subscriptions,
        lambda s: s.protocol == "sqs" and s.endpoint_consumed and not s.raw,
        "This SNS subscription delivers to a queue a Lambda function reads, without raw message delivery: "
        "set RawMessageDelivery (CDK: raw_message_delivery=True), or acknowledge this finding if the "
        "function unwraps the SNS envelope.",
        "Without raw delivery the SQS body is SNS's JSON envelope (Type, MessageId, Timestamp, Signature, "
        "Message): a function that reads the body as the message computes its keys and fingerprints on "
        "the envelope, which differs for every publish of the same message.",
        (f"{SNS_GUIDE}sns-large-payload-raw-message-delivery.html",),
    ),
    NagRule(
        "StreamRetries",
        WARNING,
        _event_sources,
        lambda s: s.kind in STREAMS and s.retries == UNBOUNDED and s.max_age == UNBOUNDED,
        "The DynamoDB or Kinesis event source mapping retries a failing batch until its records expire: "
        "set MaximumRetryAttempts or MaximumRecordAgeInSeconds (CDK: retry_attempts, max_record_age).",
        "Lambda reads a shard in order: one record that keeps failing blocks the records after it for up "
        "to the stream's retention (24 hours for DynamoDB Streams).",
        (f"{LAMBDA}services-dynamodb-errors.html", f"{LAMBDA}services-ddb-params.html"),
    ),
    NagRule(
        "DeadLetterQueueAlarm",
        WARNING,
        lambda app: app.dead_letter_queues,
        lambda s: not s.watched,
        "This queue is a dead-letter queue (a queue's or an SNS subscription's RedrivePolicy, an event "
        "source mapping's or an asynchronous invocation's on-failure destination, or a function's "
        "DeadLetterConfig names it) and no CloudWatch alarm watches its AWS/SQS "
        "ApproximateNumberOfMessagesVisible: add one with a threshold of 1, on the metric or in a metric "
        "math expression.",
        "A message in a dead-letter queue was given up on; without an alarm it waits there unseen until "
        "its retention period ends and SQS deletes it.",
        (f"{SQS_GUIDE}dead-letter-queues-alarms-cloudwatch.html",),
    ),
    NagRule(
        "AlarmTopicPolicy",
        WARNING,
        lambda app: app.alarm_topics,
        lambda s: not s.policy_allows,
        "CloudWatch alarms notify this SNS topic, and its topic policy has no statement allowing "
        f'{{"Service": "{CLOUDWATCH}"}} sns:Publish: add one (conditions aws:SourceAccount, and '
        "aws:SourceArn arn:<partition>:cloudwatch:<region>:<account>:alarm:*).",
        "A topic policy replaces SNS's default one, which lets principals of the topic owner's account "
        "publish (aws:SourceOwner), CloudWatch alarms of that account included; without the statement "
        "every alarm action fails and alarms fire unseen.",
        ("https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger",),
    ),
    NagRule(
        "AlarmTopicKey",
        WARNING,
        lambda app: app.alarm_topics,
        lambda s: not s.key_allows,
        "CloudWatch alarms notify this SNS topic, and the policy of its KMS key does not allow "
        f'{{"Service": "{CLOUDWATCH}"}} kms:Decrypt and kms:GenerateDataKey*: add that statement to the '
        f"key policy (the AWS managed key {AWS_MANAGED_SNS_KEY} cannot take it: use a customer managed "
        "key).",
        "CloudWatch encrypts each notification with the topic's key; without these actions every alarm "
        "action fails and alarms fire unseen.",
        (f"{SNS_GUIDE}sns-key-management.html#compatibility-with-aws-services",),
    ),
    NagRule(
        "IdempotencyTableTtl",
        WARNING,
        lambda app: app.idempotency_stores,
        lambda s: s.ttl_attribute is None or (s.expected is not None and s.ttl_attribute != s.expected),
        "This DynamoDB table holds idempotency records (this library's runtime or an environment variable "
        "names it, or its name says so) and has no TTL on the attribute the records expire by: enable "
        f"TimeToLiveSpecification on it ({contract.TTL_ATTRIBUTE.name}, default "
        f"{contract.TTL_ATTRIBUTE.default}, for this library's runtime).",
        "Without TTL no idempotency record is ever deleted: the table grows with every message, and what "
        "it costs with it.",
        ("https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TTL.html",),
    ),
)


def findings(t: Templates) -> dict[tuple[str, str], list[NagRule[Any]]]:
    """(stack construct path, logical id) -> the rules the resource breaks."""
    app = Subjects(t)
    found: dict[tuple[str, str], list[NagRule[Any]]] = {}
    for rule in RULES:
        broken = (rule.reported(s) for s in rule.subjects(app) if holds(rule.condition, s))
        for resource in dict.fromkeys(r for r in broken if r is not None):
            found.setdefault((resource.stack, resource.id), []).append(rule)
    return found
