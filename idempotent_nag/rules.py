"""The rules of :class:`~idempotent_nag.IdempotentPipelineChecks`, as data: for each, the subjects it checks
(:mod:`.subjects`), the condition that breaks it, the harm that does (:class:`Harm`, which sets its level),
where the finding goes, what it tells the user, and the AWS page it comes from.

A condition that reads a value the templates cannot tell is skipped (``idempotent_pipeline._rules.holds``).
Thresholds come from where the library declares them: the constructs (the visibility factor, SQS's
defaults, the short-TTL warning's comparison, AWS's receive count) and the runtime contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from operator import attrgetter
from typing import Any, Generic, TypeVar

from cdk_nag import NagMessageLevel
from idempotent_runtime import contract

from idempotent_nag.subjects import (
    AWS_MANAGED_SNS_KEY,
    CLOUDWATCH,
    PIPELINE_PROTOCOLS,
    SNS,
    SQS,
    STREAM_MAX_RETRIES,
    STREAMS,
    UNBOUNDED,
    Subjects,
)
from idempotent_nag.templates import Resource, Templates
from idempotent_pipeline import consumer
from idempotent_pipeline._facts import LAMBDA_MIN_MAX_RECEIVE_COUNT, expires_before_dead_letter
from idempotent_pipeline._rules import holds

S = TypeVar("S")

LAMBDA = "https://docs.aws.amazon.com/lambda/latest/dg/"
SQS_GUIDE = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/"
SNS_GUIDE = "https://docs.aws.amazon.com/sns/latest/dg/"
EVENTBRIDGE = "https://docs.aws.amazon.com/eventbridge/latest/userguide/"
PIPES_ERRORS = f"{EVENTBRIDGE}eb-pipes-error-troubleshooting.html"


class Harm(Enum):
    """What a configuration breaking a rule does, and the level that follows: a finding that loses messages
    or processes them twice is an error and fails the synth; one that stalls or delays them, sets them aside
    unprocessed, fails the deploy or leaves a failure unseen is a warning, reported without failing it."""

    LOSES = ("loses messages", NagMessageLevel.ERROR)
    DOUBLES = ("processes messages twice", NagMessageLevel.ERROR)
    # The pack cannot read a function's code: whether it unwraps what it reads is the user's to say.
    MAY_DOUBLE = ("processes messages twice unless the code unwraps them", NagMessageLevel.WARN)
    SETS_ASIDE = ("sends messages to the dead-letter queue unprocessed", NagMessageLevel.WARN)
    STALLS = ("stalls or slows messages", NagMessageLevel.WARN)
    FAILS_DEPLOY = ("fails the deploy", NagMessageLevel.WARN)
    UNSEEN = ("leaves failures unseen", NagMessageLevel.WARN)
    GROWS = ("keeps every record, and its cost, forever", NagMessageLevel.WARN)

    @property
    def level(self) -> NagMessageLevel:
        return self.value[1]


@dataclass(frozen=True)
class NagRule(Generic[S]):
    """One check: each subject ``subjects(app)`` yields for which ``condition`` holds breaks the rule, does
    ``harm``, and is reported on ``reported(subject)``. ``info`` says what is wrong and what fixes it,
    ``explanation`` why it matters (shown with ``verbose=True``), ``sources`` the AWS pages it comes from."""

    id: str
    harm: Harm
    subjects: Callable[[Subjects], Iterable[S]]
    condition: Callable[[S], object]
    info: str
    explanation: str
    sources: tuple[str, ...]
    reported: Callable[[S], Resource | None] = lambda subject: subject.resource  # type: ignore[attr-defined]

    @property
    def level(self) -> NagMessageLevel:
        return self.harm.level


_event_sources, _queues = attrgetter("event_sources"), attrgetter("queues")
_subscriptions, _redrives = attrgetter("subscriptions"), attrgetter("redrives")


RULES: tuple[NagRule[Any], ...] = (
    # -- ERROR: messages lost or processed twice --------------------------------------------------------
    NagRule(
        "PartialBatchResponses",
        Harm.DOUBLES,
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
        Harm.DOUBLES,
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
        Harm.LOSES,
        _queues,
        lambda s: s.consumed and not s.has_dead_letter,
        "A Lambda event source mapping or an EventBridge pipe reads this queue and it has no dead-letter "
        "queue: give it a RedrivePolicy (CDK: dead_letter_queue=sqs.DeadLetterQueue(queue=..., "
        f"max_receive_count={LAMBDA_MIN_MAX_RECEIVE_COUNT})).",
        "A message the function cannot process is received again and again until the queue's retention "
        "ends and SQS deletes it (on a FIFO queue it also holds back its message group until then); a pipe "
        "reading SQS retries up to the queue's maxReceiveCount and has no dead-letter queue of its own.",
        (f"{SQS_GUIDE}sqs-dead-letter-queues.html", f"{LAMBDA}services-sqs-configure.html", PIPES_ERRORS),
    ),
    NagRule(
        "ExpiresBeforeDeadLetter",
        Harm.LOSES,
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
        Harm.LOSES,
        _queues,
        # AWS: longer than the source's. Equal is not enough: a dead letter then expires when it would have
        # in the source queue, however little of that time is left when it arrives.
        lambda s: not s.fifo and s.dead_letter_retention <= s.retention,
        "This dead-letter queue of a standard queue keeps messages no longer than the queue it serves: make "
        "its MessageRetentionPeriod longer than the source queue's (14 days, the longest, with less for the "
        "source).",
        "On a standard queue a message keeps its enqueue time when SQS moves it to the dead-letter queue: "
        "one that spent longer in the source queue than the dead-letter queue keeps messages is deleted at "
        "once, and with equal retention periods a dead letter gets only what was left of its source's.",
        (f"{SQS_GUIDE}setting-up-dead-letter-queue-retention.html",),
        reported=lambda s: s.dead_letter,
    ),
    NagRule(
        "SubscriptionDeadLetterQueue",
        Harm.LOSES,
        _subscriptions,
        lambda s: s.protocol in PIPELINE_PROTOCOLS and (not s.has_dead_letter or not s.dead_letter_writable),
        "The SNS subscription (protocol " + " or ".join(PIPELINE_PROTOCOLS) + ") has no dead-letter "
        "queue, or one whose queue policy does not let SNS send to it: give it a RedrivePolicy with a "
        f'deadLetterTargetArn (CDK: dead_letter_queue=...) whose queue policy allows {{"Service": "{SNS}"}} '
        "sqs:SendMessage with aws:SourceArn the topic (CDK adds it to a queue of the app, not to an imported "
        "one).",
        "SNS drops a message it cannot deliver because of a client-side error (a deleted endpoint, a "
        "queue policy or key SNS cannot use) or after its last retry, unless the subscription has a "
        "dead-letter queue it may send to.",
        (f"{SNS_GUIDE}sns-dead-letter-queues.html", f"{SNS_GUIDE}sns-configure-dead-letter-queue.html"),
    ),
    NagRule(
        "StreamFailureDestination",
        Harm.LOSES,
        _event_sources,
        lambda s: s.kind in STREAMS and not s.has_failure_destination,
        "The DynamoDB or Kinesis event source mapping, or EventBridge pipe, has no on-failure destination: "
        "give it one (CDK: on_failure=SqsDlq(queue); a pipe: DeadLetterConfig in its source parameters) and "
        "bound its retries (retry_attempts, max_record_age).",
        "When a batch keeps failing, Lambda (or the pipe) retries it until the records expire or the retry "
        "limits are reached, then discards them and moves on: without a destination nothing says which "
        "records were skipped.",
        (
            f"{LAMBDA}services-dynamodb-errors.html",
            f"{LAMBDA}kinesis-on-failure-destination.html",
            PIPES_ERRORS,
        ),
    ),
    NagRule(
        "AsyncFailureDestination",
        Harm.LOSES,
        attrgetter("async_functions"),
        lambda s: not s.has_failure_destination,
        "An SNS subscription or an EventBridge rule invokes this function (asynchronously) and it has "
        "neither an on-failure destination nor a dead-letter queue: add one (CDK: on_failure="
        "SqsDestination(queue), or dead_letter_queue=queue).",
        "Lambda retries a failed asynchronous invocation twice, then discards the event; the subscription's "
        "or the rule target's dead-letter queue only holds what could not be handed to Lambda.",
        (
            f"{LAMBDA}invocation-async-error-handling.html",
            f"{LAMBDA}invocation-async-retain-records.html",
            f"{LAMBDA}lambda-services.html",
        ),
    ),
    NagRule(
        "RuleTargetDeadLetterQueue",
        Harm.LOSES,
        attrgetter("rule_targets"),
        lambda s: not s.has_failure_destination,
        "A Lambda function or an SQS queue this EventBridge rule delivers to has no dead-letter queue: give "
        "the target a DeadLetterConfig (CDK: dead_letter_queue=queue on the target), and a RetryPolicy "
        "(retry_attempts, max_event_age) if 185 attempts over 24 hours do not suit it.",
        "EventBridge retries an event it cannot deliver to a target (a throttled function, a queue policy or "
        "key it may not use) for 24 hours and up to 185 times by default, then drops it unless the target "
        "has a dead-letter queue.",
        (f"{EVENTBRIDGE}eb-rule-retry-policy.html", f"{EVENTBRIDGE}eb-rule-dlq.html"),
    ),
    NagRule(
        "QueueKeyDecrypt",
        Harm.LOSES,
        _event_sources,
        lambda s: s.kind == SQS and not s.key_readable,
        "This SQS event source mapping, or EventBridge pipe, reads a queue encrypted with a customer managed "
        "KMS key, and the role that polls it (the function's execution role, the pipe's role) may not "
        "kms:Decrypt with that key: allow it in the role's policy (CDK: key.grant_decrypt(function), or "
        "import the queue with its key, sqs.Queue.from_queue_attributes(..., key_arn=...), before "
        "add_event_source).",
        "Lambda cannot receive from the queue: no message is processed, and SQS deletes each one when the "
        "queue's retention ends, without moving it to the dead-letter queue.",
        (f"{SQS_GUIDE}sqs-configure-lambda-function-trigger.html", f"{SQS_GUIDE}sqs-key-management.html"),
    ),
    NagRule(
        "FilteredSharedQueue",
        Harm.LOSES,
        _event_sources,
        lambda s: s.kind == SQS and s.filtered and s.shared,
        "This SQS event source mapping filters its messages and another mapping (or a pipe) reads the same "
        "queue: give each function its own queue (an SNS subscription with a filter policy per queue, for "
        "instance).",
        "Lambda deletes an SQS message that does not match a mapping's filter: a message meant for the "
        "other reader is deleted whenever this mapping receives it first.",
        (f"{LAMBDA}invocation-eventfiltering.html",),
    ),
    NagRule(
        "DedupLifetime",
        Harm.DOUBLES,
        attrgetter("runtime_consumers"),
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
        Harm.SETS_ASIDE,
        _queues,
        lambda s: (
            s.consumed
            and s.max_receive_count is not None
            and s.max_receive_count < LAMBDA_MIN_MAX_RECEIVE_COUNT
        ),
        f"A Lambda event source mapping or a pipe reads this queue and its maxReceiveCount is under "
        f"{LAMBDA_MIN_MAX_RECEIVE_COUNT}: raise it to at least {LAMBDA_MIN_MAX_RECEIVE_COUNT}.",
        "Receives the poller loses to throttling count toward maxReceiveCount: with few of them a message "
        "reaches the dead-letter queue without being processed.",
        (f"{LAMBDA}services-sqs-configure.html",),
    ),
    NagRule(
        "ReservedConcurrency",
        Harm.SETS_ASIDE,
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
        Harm.FAILS_DEPLOY,
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
        Harm.STALLS,
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
        Harm.MAY_DOUBLE,
        _subscriptions,
        lambda s: s.protocol == SQS and s.endpoint_consumed and not s.raw,
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
        Harm.STALLS,
        _event_sources,
        lambda s: (
            s.kind in STREAMS
            and (s.retries == UNBOUNDED or s.retries >= STREAM_MAX_RETRIES)
            and s.max_age == UNBOUNDED
        ),
        "The DynamoDB or Kinesis event source mapping, or EventBridge pipe, retries a failing batch until "
        f"its records expire (no MaximumRetryAttempts, -1, or {STREAM_MAX_RETRIES:,}, the most a mapping "
        "takes, and no MaximumRecordAgeInSeconds): set a few retries or a record age (CDK: retry_attempts, "
        "max_record_age).",
        "Lambda reads a shard in order: one record that keeps failing blocks the records after it for up "
        "to the stream's retention (24 hours for DynamoDB Streams).",
        (f"{LAMBDA}services-dynamodb-errors.html", f"{LAMBDA}services-ddb-params.html", PIPES_ERRORS),
    ),
    NagRule(
        "DeadLetterQueueAlarm",
        Harm.UNSEEN,
        attrgetter("dead_letter_queues"),
        lambda s: not s.watched,
        "This queue is a dead-letter queue (a queue's or an SNS subscription's RedrivePolicy, an event "
        "source mapping's or an asynchronous invocation's on-failure destination, or a function's, a pipe's "
        "or an EventBridge rule target's DeadLetterConfig names it) and no CloudWatch alarm watches its "
        "AWS/SQS ApproximateNumberOfMessagesVisible: add one with a threshold of 1, on the metric or in a "
        "metric math expression.",
        "A message in a dead-letter queue was given up on; without an alarm it waits there unseen until "
        "its retention period ends and SQS deletes it.",
        (f"{SQS_GUIDE}dead-letter-queues-alarms-cloudwatch.html",),
    ),
    NagRule(
        "AlarmTopicPolicy",
        Harm.UNSEEN,
        attrgetter("alarm_topics"),
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
        Harm.UNSEEN,
        attrgetter("alarm_topics"),
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
        Harm.GROWS,
        attrgetter("idempotency_stores"),
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
