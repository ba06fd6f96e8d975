"""Messaging: SNS topic -> SQS queue (raw delivery) -> dead-letter queue, FIFO or standard, with alarms."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from aws_cdk import FeatureFlags
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from idempotent_runtime import contract

from idempotent_pipeline import _compat, _keys
from idempotent_pipeline._alarms import ONE_MINUTE, AlarmDefinition, Alarms, dead_letters, message_age
from idempotent_pipeline._facts import (
    QueueFacts,
    dead_letter_expires_early,
    describe_queue,
    expires_before_dead_letter,
    remember,
)
from idempotent_pipeline._rules import (
    Rule,
    boolean,
    describe,
    enforce,
    instance,
    is_token,
    mapping,
    options_of,
    outside,
    read,
    seconds,
    warn,
)
from idempotent_pipeline.options import (
    DEFAULT_VISIBILITY_TIMEOUT,
    WITHOUT_SNAPSHOT,
    AlarmOptions,
    MessagingOptions,
)

# With this flag on, the key policy statement SqsSubscription gives SNS on a customer-managed queue key is
# limited to the subscribed topic (aws:SourceArn); off, any SNS topic could use the key.
SQS_KEY_FOR_THIS_TOPIC_ONLY = "@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption"  # sic: CDK's spelling
UNRESTRICTED_KEY_WARNING = (
    "the existing topic's app does not enable the feature flag {flag}: the queue key's policy lets every SNS "
    "topic use the key; set the flag in cdk.json, as new CDK apps do"
)
FILTER_POLICY_WARNING = (
    "a subscription filter policy is set: SNS FIFO to SQS FIFO delivery is exactly-once only without message "
    "filtering, so the table's conditional writes are the only remaining duplicate guard"
)
# AWS/SNS: messages SNS could not move to the subscription's dead-letter queue either; they are lost.
REDRIVE_FAILED_METRIC = "NumberOfNotificationsFailedToRedriveToDlq"
SUBSCRIPTION_DLQ_NAG_REASON = (
    "this queue is the dead-letter queue of the SNS subscription (its RedrivePolicy), which the rule does "
    "not recognise; SNS moves a message here when it cannot deliver it to the queue"
)


@dataclass(frozen=True)
class MessagingProps:
    """A Messaging's configuration as plain values, read once (TOKEN: only known at deploy time)."""

    options: MessagingOptions
    alarms: Alarms
    topic: sns.ITopic | None  # given
    dead_letter_queue: sqs.IQueue | None  # given
    given_dlq: QueueFacts | None
    key: kms.IKey | None
    topic_key: kms.IKey | None
    fifo: bool
    with_topic: bool
    content_based_deduplication: bool | None
    high_throughput: bool
    visibility_timeout: Any  # seconds, the default applied
    retention_period: Any
    dead_letter_retention_period: Any
    max_receive_count: Any
    topic_fifo: bool | None  # the given topic's; None: none, or unknown at synth
    dead_letter_queue_fifo: bool | None
    filter_policy: bool
    max_message_age: Any  # the message-age alarm's threshold (None: no alarms)

    @property
    def dead_letter_retention(self) -> Any:
        """The retention of the dead-letter queue used: created here, or given."""
        return (
            self.dead_letter_retention_period if self.given_dlq is None else self.given_dlq.retention_seconds
        )

    @property
    def deduplicate_by_content(self) -> bool | None:
        """A new FIFO queue's and topic's ContentBasedDeduplication; on a standard queue or topic even False
        is an attribute SQS and SNS refuse (a rule refuses True there), so it is left out."""
        return self.content_based_deduplication is not False if self.fifo else None

    @property
    def dead_letter_retention_name(self) -> str:
        if self.dead_letter_queue is None:
            return "MessagingOptions.dead_letter_retention_period"
        return f"the retention period of dead_letter_queue {self.dead_letter_queue.node.path}"


def _kind(fifo: object) -> str:
    return "FIFO" if fifo else "standard"


def _range(prop: str, low: int, high: int, limits: str) -> Rule[MessagingProps]:
    return Rule(
        lambda p: outside(getattr(p, prop), low, high),
        lambda p: f"MessagingOptions.{prop} must be {limits}; got {getattr(p, prop)} seconds",
    )


def _removal_policy(prop: str) -> Rule[MessagingProps]:
    return Rule(
        lambda p: getattr(p.options, prop) not in WITHOUT_SNAPSHOT,
        lambda p: (
            f"MessagingOptions.{prop} must be DESTROY, RETAIN or RETAIN_ON_UPDATE_OR_DELETE (queues have "
            f"no snapshots); got {getattr(p.options, prop)}"
        ),
    )


def _needs(prop: str, needed: str, setting: str) -> Rule[MessagingProps]:
    """``prop`` set with ``setting`` False, which takes away what it ``needed``."""
    return Rule(
        lambda p: bool(getattr(p.options, prop)) and not getattr(p, setting),
        lambda p: f"MessagingOptions.{prop} {needed}; got it with {setting}=False",
    )


RULES: tuple[Rule[MessagingProps], ...] = (
    _range("visibility_timeout", 0, contract.SQS_MAX_VISIBILITY_SECONDS, "at most 12 hours"),
    _range("retention_period", 60, contract.SQS_MAX_RETENTION_SECONDS, "between 1 minute and 14 days"),
    _range(
        "dead_letter_retention_period", 60, contract.SQS_MAX_RETENTION_SECONDS, "between 1 minute and 14 days"
    ),
    Rule(
        lambda p: (
            None not in (p.retention_period, p.visibility_timeout)
            and p.retention_period <= p.visibility_timeout
        ),
        lambda p: (
            f"MessagingOptions.retention_period ({p.retention_period} seconds) must be longer than the "
            f"visibility timeout ({p.visibility_timeout} seconds): a message would expire while a failed "
            "receive still hides it, and never reach the dead-letter queue"
        ),
    ),
    Rule(
        lambda p: (
            None not in (p.max_message_age, p.retention_period) and p.max_message_age >= p.retention_period
        ),
        lambda p: (
            f"AlarmOptions.max_message_age ({p.max_message_age} seconds) must be shorter than "
            f"MessagingOptions.retention_period ({p.retention_period} seconds): no message gets that old "
            "before it expires, so the message-age alarm could never fire"
        ),
    ),
    Rule(
        lambda p: (
            None not in (p.dead_letter_retention, p.retention_period)
            and dead_letter_expires_early(p.fifo, p.dead_letter_retention, p.retention_period)
        ),
        lambda p: (
            f"{p.dead_letter_retention_name} ({p.dead_letter_retention} seconds) must be longer than "
            f"MessagingOptions.retention_period ({p.retention_period} seconds) on standard queues: SQS keeps "
            "a message's enqueue time when it moves it to the dead-letter queue, so a dead letter would "
            "expire early, or at once (14 days is the longest retention: give the source queue less)"
        ),
    ),
    _needs("content_based_deduplication", "applies only to FIFO queues", "fifo"),
    _needs("high_throughput", "applies only to FIFO queues", "fifo"),
    Rule(
        lambda p: not p.with_topic and p.topic is not None,
        lambda p: "topic was given but MessagingOptions.with_topic is False; give one or the other",
    ),
    Rule(
        lambda p: p.topic_fifo is not None and p.topic_fifo != p.fifo,
        lambda p: (
            f"topic must be a {_kind(p.fifo)} topic (MessagingOptions.fifo={p.fifo}); got a "
            f"{_kind(p.topic_fifo)} topic: " + describe(p.topic, "topic_arn")
        ),
    ),
    Rule(
        lambda p: p.dead_letter_queue_fifo is not None and p.dead_letter_queue_fifo != p.fifo,
        lambda p: (
            f"dead_letter_queue must be a {_kind(p.fifo)} queue (MessagingOptions.fifo={p.fifo}): SQS "
            f"refuses a dead-letter queue of the other type; got a {_kind(p.dead_letter_queue_fifo)} queue: "
            + describe(p.dead_letter_queue, "queue_name")
        ),
    ),
    Rule(
        lambda p: p.topic_key is not None and p.topic_key is p.key,
        lambda p: (
            "MessagingOptions.topic_encryption_key must be a different key than encryption_key: the queue "
            "key's policy names the topic, so one key for both is a dependency cycle; got the same key "
            + (p.topic_key.node.path if p.topic_key is not None else "")
        ),
    ),
    Rule(
        lambda p: p.topic_key is not None and p.topic is not None,
        lambda p: (
            "MessagingOptions.topic_encryption_key applies only to a new topic; encrypt the existing "
            f"topic where it is defined (got topic {describe(p.topic, 'topic_arn')})"
        ),
    ),
    _needs("topic_encryption_key", "needs a topic", "with_topic"),
    _needs("filter_policy", "needs a topic", "with_topic"),
    _removal_policy("removal_policy"),
    _removal_policy("dead_letter_removal_policy"),
    # -- warnings ---------------------------------------------------------------------------------------
    Rule(
        lambda p: p.fifo and p.filter_policy,
        lambda p: FILTER_POLICY_WARNING,
        warning="idempotent-pipeline:filter-policy",
    ),
    Rule(
        lambda p: (
            p.fifo
            and None not in (p.dead_letter_retention, p.retention_period)
            and p.dead_letter_retention < p.retention_period
        ),
        lambda p: (
            f"{p.dead_letter_retention_name} ({p.dead_letter_retention} seconds) is shorter than "
            f"MessagingOptions.retention_period ({p.retention_period} seconds): a dead letter is kept for "
            "less time than a message waiting to be processed (on FIFO queues SQS restarts its clock in the "
            "dead-letter queue, so nothing expires early)"
        ),
        warning="idempotent-pipeline:short-dead-letter-retention",
    ),
    Rule(
        lambda p: (
            None not in (p.retention_period, p.visibility_timeout, p.max_receive_count)
            and expires_before_dead_letter(p.retention_period, p.max_receive_count, p.visibility_timeout)
        ),
        lambda p: (
            f"MessagingOptions.retention_period ({p.retention_period} seconds) is shorter than "
            f"max_receive_count x visibility_timeout ({p.max_receive_count} x {p.visibility_timeout} = "
            f"{p.max_receive_count * p.visibility_timeout} seconds): a message that keeps failing can expire "
            "before its last receive, and never reach the dead-letter queue (SQS does not dead-letter "
            "expired messages)"
        ),
        warning="idempotent-pipeline:short-retention",
    ),
)


def _resolve(
    scope: Construct,
    topic: sns.ITopic | None,
    dead_letter_queue: sqs.IQueue | None,
    options: MessagingOptions | None,
    alarm_options: AlarmOptions | None,
) -> MessagingProps:
    o = options_of("options", options, MessagingOptions)
    topic = instance("topic", topic, sns.ITopic, "an sns.ITopic")
    dead_letter_queue = instance("dead_letter_queue", dead_letter_queue, sqs.IQueue, "an sqs.IQueue")
    mapping(
        "MessagingOptions.filter_policy",
        o.filter_policy,
        sns.SubscriptionFilter,
        "sns.SubscriptionFilter (e.g. {'kind': sns.SubscriptionFilter.string_filter(allowlist=['a'])})",
    )
    given_dlq = describe_queue(dead_letter_queue) if dead_letter_queue is not None else None
    alarms = Alarms.read(scope, alarm_options)
    visibility = o.visibility_timeout if o.visibility_timeout is not None else DEFAULT_VISIBILITY_TIMEOUT
    return MessagingProps(
        options=o,
        alarms=alarms,
        topic=topic,
        dead_letter_queue=dead_letter_queue,
        given_dlq=given_dlq,
        key=instance("MessagingOptions.encryption_key", o.encryption_key, kms.IKey, "a kms.IKey"),
        topic_key=instance(
            "MessagingOptions.topic_encryption_key", o.topic_encryption_key, kms.IKey, "a kms.IKey"
        ),
        **{
            name: boolean(f"MessagingOptions.{name}", getattr(o, name))
            for name in ("fifo", "with_topic", "content_based_deduplication", "high_throughput")
        },
        visibility_timeout=seconds("MessagingOptions.visibility_timeout", visibility),
        **{
            name: seconds(f"MessagingOptions.{name}", getattr(o, name))
            for name in ("retention_period", "dead_letter_retention_period")
        },
        max_receive_count=read(
            "MessagingOptions.max_receive_count", contract.MAX_RECEIVE_COUNT.kind, o.max_receive_count
        )[0],
        topic_fifo=_topic_fifo(topic),
        dead_letter_queue_fifo=given_dlq.fifo if given_dlq is not None else None,
        filter_policy=bool(o.filter_policy),
        max_message_age=alarms.max_message_age_seconds if alarms.enabled else None,
    )


class Messaging(Construct):
    """An SNS topic delivering raw messages to an SQS queue that redrives to a dead-letter queue.

    The subscription has its own dead-letter queue (``subscription_dead_letter_queue``), so a message SNS
    cannot deliver (a key policy, a disabled key, too many attributes) is kept instead of dropped. Every queue
    is encrypted (``MessagingOptions.encryption_key``) and denies non-TLS access; the queue and the
    subscription's DLQ accept ``sqs:SendMessage`` only from the topic; a new topic denies non-TLS publishing.
    CloudFormation names the queues. With ``with_topic=False`` there is no topic: producers send to the queue.

    Alarms (``alarm_options``): messages in either dead-letter queue (≥ 1), notifications SNS failed to
    deliver (≥ 1), notifications SNS failed to move to the subscription's dead-letter queue too (≥ 1), the
    age of the oldest queued message.

    :param topic: an existing topic to subscribe the queue to (its type must match ``fifo``). Default: a new
        topic.
    :param dead_letter_queue: an existing queue as the dead-letter queue (same type). Default: a new one.
    :param options: :class:`MessagingOptions`. Default: ``MessagingOptions()``.
    :param alarm_options: :class:`AlarmOptions`. Default: ``AlarmOptions()``.
    """

    dead_letter_queue_alarm: cloudwatch.Alarm | None = None
    subscription_dead_letter_queue_alarm: cloudwatch.Alarm | None = None
    notifications_failed_alarm: cloudwatch.Alarm | None = None
    notifications_failed_to_redrive_alarm: cloudwatch.Alarm | None = None
    message_age_alarm: cloudwatch.Alarm | None = None

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        topic: sns.ITopic | None = None,
        dead_letter_queue: sqs.IQueue | None = None,
        options: MessagingOptions | None = None,
        alarm_options: AlarmOptions | None = None,
    ) -> None:
        super().__init__(scope, id)
        props = _resolve(self, topic, dead_letter_queue, options, alarm_options)
        enforce(self, RULES, props)
        if props.key is not None and props.with_topic:
            # Whatever the app's cdk.json says: SNS's use of the queue key is limited to this topic. CDK reads
            # the flag from the topic's scope, so this covers a topic created here (an existing one: below).
            self.node.set_context(SQS_KEY_FOR_THIS_TOPIC_ONLY, True)
        self.fifo: bool = props.fifo
        self.encryption_key = props.key
        self.max_receive_count: int = props.options.max_receive_count
        self._build_queues(props)
        self.topic: sns.ITopic | None = None
        self.subscription_dead_letter_queue: sqs.Queue | None = None
        self.subscription: sns.Subscription | None = None
        if props.with_topic:
            self._subscribe(props)
        elif props.key is not None:
            _producers_need(self, props.key, "encryption_key", "producers cannot send to the queue")
        self.alarms: tuple[cloudwatch.Alarm, ...] = props.alarms.create(self, self._alarm_definitions(props))

    def _queue(self, id: str, p: MessagingProps, fifo: bool, key: kms.IKey | None, **props: Any) -> sqs.Queue:
        """A queue of this block, TLS-only and encrypted (``key``, else SSE-SQS); with high throughput every
        queue that can receive a burst gets the per-group settings (a redrive from SNS or SQS into a
        dead-letter queue at the default FIFO limit is throttled). A dead-letter queue unless ``props`` set
        the content-based deduplication, retention and removal policy."""
        fifo_or_none = True if fifo else None
        if p.high_throughput:
            props = {
                "deduplication_scope": sqs.DeduplicationScope.MESSAGE_GROUP,
                "fifo_throughput_limit": sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
            } | props
        dead_letters = {
            "content_based_deduplication": fifo_or_none,
            "retention_period": p.options.dead_letter_retention_period,
            "removal_policy": p.options.dead_letter_removal_policy,
        }
        return sqs.Queue(
            self,
            id,
            fifo=fifo_or_none,
            encryption=sqs.QueueEncryption.KMS if key is not None else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=key,
            enforce_ssl=True,
            **(dead_letters | props),
        )

    def _build_queues(self, p: MessagingProps) -> None:
        """The dead-letter queue (unless given) and the queue, and what the consumer learns of them."""
        o, key, fifo = p.options, p.key, p.fifo
        dead_letter_queue = p.dead_letter_queue
        if dead_letter_queue is None:
            dead_letter_queue = self._queue("DeadLetterQueue", p, fifo, key)
            remember(
                dead_letter_queue,
                QueueFacts(
                    fifo=fifo,
                    retention_seconds=p.dead_letter_retention_period,
                    encryption_key=key,
                    encryption_key_known=True,
                    alarmed=p.alarms.enabled,
                    removal_policy=o.dead_letter_removal_policy,
                ),
            )
        elif p.given_dlq is not None:
            # The alarm on its depth is made here: a consumer of the queue does not make a second one.
            remember(dead_letter_queue, dataclasses.replace(p.given_dlq, alarmed=p.alarms.enabled))
        self.dead_letter_queue: sqs.IQueue = dead_letter_queue
        self.queue = self._queue(
            "Queue",
            p,
            fifo,
            key,
            content_based_deduplication=p.deduplicate_by_content,
            visibility_timeout=o.visibility_timeout or DEFAULT_VISIBILITY_TIMEOUT,
            retention_period=o.retention_period,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=dead_letter_queue, max_receive_count=o.max_receive_count
            ),
            removal_policy=o.removal_policy,
        )
        remember(
            self.queue,
            QueueFacts(
                fifo=fifo,
                visibility_seconds=p.visibility_timeout,
                retention_seconds=p.retention_period,
                max_receive_count=p.max_receive_count,
                dead_letter_queue=dead_letter_queue,
                encryption_key=key,
                encryption_key_known=True,
                alarmed=p.alarms.enabled,
            ),
        )

    def _subscribe(self, p: MessagingProps) -> None:
        """The topic (unless given), the subscription's own dead-letter queue, the subscription, and what
        imported keys must allow."""
        topic, key = p.topic, p.key
        if topic is None:
            topic = sns.Topic(
                self,
                "Topic",
                fifo=True if p.fifo else None,
                content_based_deduplication=p.deduplicate_by_content,
                master_key=p.topic_key,
                enforce_ssl=True,
            )
            _compat.tls_only_topic(topic)
            if p.high_throughput:
                _compat.message_group_throughput(topic)
        elif key is not None and not FeatureFlags.of(topic).is_enabled(SQS_KEY_FOR_THIS_TOPIC_ONLY):
            warn(
                self,
                "idempotent-pipeline:unrestricted-queue-key",
                UNRESTRICTED_KEY_WARNING.format(flag=SQS_KEY_FOR_THIS_TOPIC_ONLY),
            )
        self.topic = topic
        # The subscription's DLQ is where SNS puts what it cannot deliver to the queue, a key it cannot use
        # included. With a key of the app (whose policy is written here) it is encrypted like the other
        # queues; with an imported key, whose policy may lack SNS or which may be disabled, it would fail for
        # the same reason as the queue and SNS would drop the message: SSE-SQS instead, which SNS can always
        # write to. FIFO with a FIFO topic: SNS delivers a FIFO topic's failures only to a FIFO queue.
        self.subscription_dead_letter_queue = self._queue(
            "SubscriptionDeadLetterQueue",
            p,
            p.topic_fifo if p.topic_fifo is not None else p.fifo,
            key if not _keys.is_imported(key) else None,
        )
        _compat.acknowledge(
            self.subscription_dead_letter_queue, "AwsSolutions-SQS3", SUBSCRIPTION_DLQ_NAG_REASON
        )
        # SqsSubscription adds the queue policy statements allowing sqs:SendMessage from this topic only
        # (aws:SourceArn), on the queue and on the subscription's dead-letter queue, and for a key defined in
        # the app the key policy statement SNS needs (both queues then use that key).
        self.subscription = topic.add_subscription(
            subscriptions.SqsSubscription(
                self.queue,
                raw_message_delivery=True,
                filter_policy=dict(p.options.filter_policy) if p.options.filter_policy else None,
                dead_letter_queue=self.subscription_dead_letter_queue,
            )
        )
        # SqsSubscription waits for the queue's policy, not for the statement it adds to the dead-letter
        # queue's: until that exists, SNS cannot move an undeliverable message there and drops it.
        # (enforce_ssl made the queue's policy, construct id "Policy", when the queue was created.)
        self.subscription.node.add_dependency(self.subscription_dead_letter_queue.node.find_child("Policy"))
        if key is not None:
            _keys.require_statement(
                self,
                key,
                warning_id=_keys.QUEUE_KEY_WARNING,
                prop="MessagingOptions.encryption_key",
                statement=_keys.SNS_TO_QUEUE_STATEMENT,
                consequence=(
                    "SNS cannot deliver to the queue and moves every message to the subscription's "
                    "dead-letter queue (encrypted with SSE-SQS instead of this key, so SNS can always "
                    "write there, and alarmed)"
                ),
            )
        if p.topic_key is not None:
            _producers_need(
                self, p.topic_key, "topic_encryption_key", "publishers cannot publish to the topic"
            )

    def _alarm_definitions(self, p: MessagingProps) -> list[AlarmDefinition]:
        definitions = [dead_letters(self.dead_letter_queue)]
        topic, subscription_dlq = self.topic, self.subscription_dead_letter_queue
        if topic is not None and subscription_dlq is not None:
            definitions += [
                dead_letters(
                    subscription_dlq,
                    "SubscriptionDeadLetterQueueAlarm",
                    "messages SNS could not deliver to the queue are waiting in the subscription's "
                    "dead-letter queue",
                ),
                AlarmDefinition(
                    "NotificationsFailedAlarm",
                    lambda: topic.metric_number_of_notifications_failed(period=ONE_MINUTE, statistic="Sum"),
                    1,
                    "SNS failed to deliver messages to the queue (see the subscription's dead-letter queue)",
                ),
                AlarmDefinition(
                    "NotificationsFailedToRedriveAlarm",
                    lambda: topic.metric(REDRIVE_FAILED_METRIC, period=ONE_MINUTE, statistic="Sum"),
                    1,
                    "SNS could deliver messages neither to the queue nor to the subscription's dead-letter "
                    "queue, and dropped them",
                ),
            ]
        return [*definitions, message_age(self.queue, p.alarms.max_message_age)]

    def grant_publish(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to put messages into the pipeline: ``sns:Publish`` on the topic (and its key), or
        with no topic ``sqs:SendMessage`` on the queue (and its key)."""
        if self.topic is not None:
            return self.topic.grant_publish(grantee)
        return self.queue.grant_send_messages(grantee)


def _producers_need(scope: Construct, key: kms.IKey, prop: str, consequence: str) -> None:
    """What an imported key (of the queue producers send to, or of the topic) must let producers do."""
    warning_id = _keys.TOPIC_KEY_WARNING if prop == "topic_encryption_key" else _keys.QUEUE_KEY_WARNING
    _keys.require_statement(
        scope,
        key,
        warning_id=warning_id,
        prop=f"MessagingOptions.{prop}",
        statement=_keys.PRODUCERS_STATEMENT,
        consequence=consequence,
    )


def _topic_fifo(topic: sns.ITopic | None) -> bool | None:
    """The topic's type, or None when it cannot be known at synth (imported from a deploy-time ARN)."""
    if topic is None:
        return None
    fifo = bool(topic.fifo)
    if not fifo and not isinstance(topic, sns.Topic) and is_token(topic.topic_arn):
        return None
    return fifo
