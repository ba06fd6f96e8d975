"""Messaging: SNS topic -> SQS queue (raw delivery) -> dead-letter queue, FIFO or standard, with alarms."""

from __future__ import annotations

import dataclasses

from aws_cdk import RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from idempotent_runtime import contract

from idempotent_pipeline import _compat, _keys
from idempotent_pipeline._alarms import ONE_MINUTE, Alarms
from idempotent_pipeline._facts import QueueFacts, describe_queue, remember
from idempotent_pipeline._rules import (
    Rule,
    boolean,
    describe,
    enforce,
    instance,
    integer,
    is_token,
    lazy,
    mapping,
    options_of,
    outside,
    seconds,
    warn,
)
from idempotent_pipeline.options import DEFAULT_VISIBILITY_TIMEOUT, AlarmOptions, MessagingOptions

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
QUEUE_REMOVAL_POLICIES = (
    RemovalPolicy.DESTROY,
    RemovalPolicy.RETAIN,
    RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
)
# AWS/SNS: messages SNS could not move to the subscription's dead-letter queue either; they are lost.
REDRIVE_FAILED_METRIC = "NumberOfNotificationsFailedToRedriveToDlq"
SUBSCRIPTION_DLQ_NAG_REASON = (
    "this queue is the dead-letter queue of the SNS subscription (its RedrivePolicy), which the rule does "
    "not "
    "recognise; SNS moves a message here when it cannot deliver it to the queue"
)

RULES = (
    Rule(
        ("max_receive_count",),
        outside(*contract.MAX_RECEIVE_COUNT_RANGE),
        "MessagingOptions.max_receive_count must be between {range[0]} and {range[1]}; got "
        "{max_receive_count}",
    ),
    Rule(
        ("visibility_timeout",),
        outside(0, contract.SQS_MAX_VISIBILITY_SECONDS),
        "MessagingOptions.visibility_timeout must be at most 12 hours; got {visibility_timeout} seconds",
    ),
    Rule(
        ("retention_period",),
        outside(60, contract.SQS_MAX_RETENTION_SECONDS),
        "MessagingOptions.retention_period must be between 1 minute and 14 days; got {retention_period} "
        "seconds",
    ),
    Rule(
        ("dead_letter_retention_period",),
        outside(60, contract.SQS_MAX_RETENTION_SECONDS),
        "MessagingOptions.dead_letter_retention_period must be between 1 minute and 14 days; "
        "got {dead_letter_retention_period} seconds",
    ),
    Rule(
        ("retention_period", "visibility_timeout"),
        lambda retention, visibility: None not in (retention, visibility) and retention <= visibility,
        "MessagingOptions.retention_period ({retention_period} seconds) must be longer than the visibility "
        "timeout ({visibility_timeout} seconds): a message would expire while a failed receive still hides "
        "it, and never reach the dead-letter queue",
    ),
    Rule(
        ("max_message_age", "retention_period"),
        lambda age, retention: age is not None and retention is not None and age >= retention,
        "AlarmOptions.max_message_age ({max_message_age} seconds) must be shorter than "
        "MessagingOptions.retention_period ({retention_period} seconds): no message gets that old before it "
        "expires, so the message-age alarm could never fire",
    ),
    Rule(
        ("fifo", "dead_letter_retention", "retention_period"),
        lambda fifo, dlq, retention: not fifo and None not in (dlq, retention) and dlq < retention,
        "{dead_letter_retention_name} ({dead_letter_retention} seconds) must be at least "
        "MessagingOptions.retention_period ({retention_period} seconds) on standard queues: SQS keeps a "
        "message's enqueue time when it moves it to the dead-letter queue, so a dead letter would expire "
        "early, or at once",
    ),
    Rule(
        ("fifo", "content_based_deduplication"),
        lambda fifo, dedup: not fifo and dedup,
        "MessagingOptions.content_based_deduplication applies only to FIFO queues; got it with fifo=False",
    ),
    Rule(
        ("fifo", "high_throughput"),
        lambda fifo, high: not fifo and high,
        "MessagingOptions.high_throughput applies only to FIFO queues; got it with fifo=False",
    ),
    Rule(
        ("with_topic", "topic"),
        lambda with_topic, topic: not with_topic and topic,
        "topic was given but MessagingOptions.with_topic is False; give one or the other",
    ),
    Rule(
        ("fifo", "topic_fifo"),
        lambda fifo, topic_fifo: topic_fifo is not None and topic_fifo != fifo,
        "topic must be a {wanted} topic (MessagingOptions.fifo={fifo}); got a {got} topic: {topic_name}",
    ),
    Rule(
        ("fifo", "dead_letter_queue_fifo"),
        lambda fifo, dlq_fifo: dlq_fifo is not None and dlq_fifo != fifo,
        "dead_letter_queue must be a {wanted} queue (MessagingOptions.fifo={fifo}): SQS refuses a "
        "dead-letter "
        "queue of the other type; got a {got_dlq} queue: {dead_letter_queue_name}",
    ),
    Rule(
        ("topic_key", "same_key"),
        lambda topic_key, same: topic_key and same,
        "MessagingOptions.topic_encryption_key must be a different key than encryption_key: the queue key's "
        "policy names the topic, so one key for both is a dependency cycle; got the same key "
        "{topic_key_path}",
    ),
    Rule(
        ("topic_key", "topic"),
        lambda topic_key, topic: topic_key and topic,
        "MessagingOptions.topic_encryption_key applies only to a new topic; encrypt the existing topic "
        "where it "
        "is defined (got topic {topic_name})",
    ),
    Rule(
        ("topic_key", "with_topic"),
        lambda topic_key, with_topic: topic_key and not with_topic,
        "MessagingOptions.topic_encryption_key needs a topic; got it with with_topic=False",
    ),
    Rule(
        ("filter_policy", "with_topic"),
        lambda filter_policy, with_topic: filter_policy and not with_topic,
        "MessagingOptions.filter_policy needs a topic; got it with with_topic=False",
    ),
    Rule(
        ("removal_policy",),
        lambda policy: policy not in QUEUE_REMOVAL_POLICIES,
        "MessagingOptions.removal_policy must be DESTROY, RETAIN or RETAIN_ON_UPDATE_OR_DELETE "
        "(queues have no snapshots); got {removal_policy}",
    ),
    Rule(
        ("dead_letter_removal_policy",),
        lambda policy: policy not in QUEUE_REMOVAL_POLICIES,
        "MessagingOptions.dead_letter_removal_policy must be DESTROY, RETAIN or RETAIN_ON_UPDATE_OR_DELETE "
        "(queues have no snapshots); got {dead_letter_removal_policy}",
    ),
    Rule(
        ("fifo", "filter_policy"),
        lambda fifo, filter_policy: fifo and filter_policy,
        FILTER_POLICY_WARNING,
        warning="idempotent-pipeline:filter-policy",
    ),
    Rule(
        ("fifo", "dead_letter_retention", "retention_period"),
        lambda fifo, dlq, retention: fifo and None not in (dlq, retention) and dlq < retention,
        "{dead_letter_retention_name} ({dead_letter_retention} seconds) is shorter than "
        "MessagingOptions.retention_period ({retention_period} seconds): a dead letter is kept for less time "
        "than a message waiting to be processed (on FIFO queues SQS restarts its clock in the dead-letter "
        "queue, so nothing expires early)",
        warning="idempotent-pipeline:short-dead-letter-retention",
    ),
    Rule(
        ("retention_period", "visibility_timeout", "max_receive_count"),
        lambda retention, visibility, receives: (
            None not in (retention, visibility, receives) and retention < receives * visibility
        ),
        "MessagingOptions.retention_period ({retention_period} seconds) is shorter than max_receive_count x "
        "visibility_timeout ({max_receive_count} x {visibility_timeout} = {receive_window} seconds): a "
        "message that keeps failing can expire before its last receive, and never reach the dead-letter "
        "queue (SQS does not dead-letter expired messages)",
        warning="idempotent-pipeline:short-retention",
    ),
)


class Messaging(Construct):
    """An SNS topic delivering raw messages to an SQS queue that redrives to a dead-letter queue.

    FIFO by default (``MessagingOptions.fifo``): FIFO topic, queue and dead-letter queues. The subscription
    has its own dead-letter queue (``subscription_dead_letter_queue``), so a message SNS cannot deliver (a
    key policy, a disabled key, too many attributes) is kept instead of dropped. Every queue is encrypted
    (SSE-SQS or ``encryption_key``; the subscription's DLQ with SSE-SQS when ``encryption_key`` is imported,
    so SNS can write to it whatever that key's policy or state) and denies non-TLS access; the queue and the
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
        options = options_of("options", options, MessagingOptions)
        topic = instance("topic", topic, sns.ITopic, "an sns.ITopic")
        dead_letter_queue = instance("dead_letter_queue", dead_letter_queue, sqs.IQueue, "an sqs.IQueue")
        key = instance("MessagingOptions.encryption_key", options.encryption_key, kms.IKey, "a kms.IKey")
        topic_key = instance(
            "MessagingOptions.topic_encryption_key", options.topic_encryption_key, kms.IKey, "a kms.IKey"
        )
        mapping(
            "MessagingOptions.filter_policy",
            options.filter_policy,
            sns.SubscriptionFilter,
            "sns.SubscriptionFilter (e.g. {'kind': sns.SubscriptionFilter.string_filter(allowlist=['a'])})",
        )
        fifo = boolean("MessagingOptions.fifo", options.fifo)
        topic_fifo = _topic_fifo(topic)
        given_dlq = describe_queue(dead_letter_queue) if dead_letter_queue is not None else None
        dlq_fifo = given_dlq.fifo if given_dlq is not None else None
        values = {
            "fifo": fifo,
            "with_topic": boolean("MessagingOptions.with_topic", options.with_topic),
            "content_based_deduplication": boolean(
                "MessagingOptions.content_based_deduplication", options.content_based_deduplication
            ),
            "high_throughput": boolean("MessagingOptions.high_throughput", options.high_throughput),
            "visibility_timeout": seconds("MessagingOptions.visibility_timeout", options.visibility_timeout),
            "retention_period": seconds("MessagingOptions.retention_period", options.retention_period),
            "dead_letter_retention_period": seconds(
                "MessagingOptions.dead_letter_retention_period", options.dead_letter_retention_period
            ),
            "max_receive_count": integer("MessagingOptions.max_receive_count", options.max_receive_count),
            "range": contract.MAX_RECEIVE_COUNT_RANGE,
            "topic": topic is not None,
            "topic_fifo": topic_fifo,
            "dead_letter_queue_fifo": dlq_fifo,
            "wanted": "FIFO" if fifo else "standard",
            "got": "FIFO" if topic_fifo else "standard",
            "got_dlq": "FIFO" if dlq_fifo else "standard",
            "topic_name": lazy(lambda: describe(topic, topic.topic_arn) if topic is not None else ""),
            "dead_letter_queue_name": lazy(
                lambda: describe(dead_letter_queue, dead_letter_queue.queue_name) if dead_letter_queue else ""
            ),
            "topic_key": topic_key is not None,
            "same_key": topic_key is not None and topic_key is key,
            "topic_key_path": lazy(lambda: topic_key.node.path if topic_key is not None else ""),
            "filter_policy": bool(options.filter_policy),
            "removal_policy": options.removal_policy,
            "dead_letter_removal_policy": options.dead_letter_removal_policy,
        }
        if options.visibility_timeout is None:
            values["visibility_timeout"] = seconds("visibility_timeout", DEFAULT_VISIBILITY_TIMEOUT)
        if given_dlq is None:  # created here, with dead_letter_retention_period
            values["dead_letter_retention"] = values["dead_letter_retention_period"]
            values["dead_letter_retention_name"] = "MessagingOptions.dead_letter_retention_period"
        else:
            values["dead_letter_retention"] = given_dlq.retention_seconds
            given_queue = dead_letter_queue  # read only for an error message: no jsii request otherwise
            values["dead_letter_retention_name"] = lazy(
                lambda: (
                    "the retention period of dead_letter_queue "
                    + (given_queue.node.path if given_queue is not None else "")
                )
            )
        visibility, receives = values["visibility_timeout"], values["max_receive_count"]
        values["receive_window"] = (
            visibility * receives if isinstance(visibility, int) and isinstance(receives, int) else None
        )
        alarms = Alarms.read(self, alarm_options)
        values["max_message_age"] = alarms.max_message_age_seconds if alarms.enabled else None
        enforce(self, RULES, values)
        with_topic = bool(values["with_topic"])
        fifo_or_none = True if fifo else None
        if key is not None and with_topic:
            # Whatever the app's cdk.json says: SNS's use of the queue key is limited to this topic. CDK reads
            # the flag from the topic's scope, so this covers a topic created here (an existing one: below).
            self.node.set_context(SQS_KEY_FOR_THIS_TOPIC_ONLY, True)

        self.fifo: bool = fifo
        self.encryption_key = key
        self.max_receive_count: int = options.max_receive_count
        encryption = sqs.QueueEncryption.KMS if key is not None else sqs.QueueEncryption.SQS_MANAGED
        retained = options.dead_letter_removal_policy
        # High throughput: every queue that can receive a burst gets the per-group settings (a redrive from
        # SNS or SQS into a dead-letter queue at the default FIFO limit is throttled).
        high = bool(options.high_throughput)
        group_scope = sqs.DeduplicationScope.MESSAGE_GROUP if high else None
        group_limit = sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID if high else None

        if dead_letter_queue is None:
            dead_letter_queue = sqs.Queue(
                self,
                "DeadLetterQueue",
                fifo=fifo_or_none,
                content_based_deduplication=fifo_or_none,
                retention_period=options.dead_letter_retention_period,
                encryption=encryption,
                encryption_master_key=key,
                enforce_ssl=True,
                removal_policy=retained,
                deduplication_scope=group_scope,
                fifo_throughput_limit=group_limit,
            )
            remember(
                dead_letter_queue,
                QueueFacts(
                    fifo=fifo,
                    retention_seconds=values["dead_letter_retention_period"],
                    encryption_key=key,
                    encryption_key_known=True,
                    alarmed=alarms.enabled,
                ),
            )
        elif given_dlq is not None:
            # The alarm on its depth is made here: a consumer of the queue does not make a second one.
            remember(dead_letter_queue, dataclasses.replace(given_dlq, alarmed=alarms.enabled))
        self.dead_letter_queue: sqs.IQueue = dead_letter_queue

        # FIFO only: on a standard queue or topic even False is an attribute SQS and SNS refuse (the rule
        # above rejects True there), so the property is left out.
        content_based_deduplication = None
        if fifo:
            content_based_deduplication = (
                True if options.content_based_deduplication is None else options.content_based_deduplication
            )
        visibility_timeout = options.visibility_timeout
        if visibility_timeout is None:
            visibility_timeout = DEFAULT_VISIBILITY_TIMEOUT
        self.queue = sqs.Queue(
            self,
            "Queue",
            fifo=fifo_or_none,
            content_based_deduplication=content_based_deduplication,
            visibility_timeout=visibility_timeout,
            retention_period=options.retention_period,
            encryption=encryption,
            encryption_master_key=key,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=dead_letter_queue, max_receive_count=options.max_receive_count
            ),
            removal_policy=options.removal_policy,
            deduplication_scope=group_scope,
            fifo_throughput_limit=group_limit,
        )
        remember(
            self.queue,
            QueueFacts(
                fifo=fifo,
                visibility_seconds=values["visibility_timeout"],
                retention_seconds=values["retention_period"],
                max_receive_count=values["max_receive_count"],
                dead_letter_queue=dead_letter_queue,
                encryption_key=key,
                encryption_key_known=True,
                alarmed=alarms.enabled,
            ),
        )

        self.topic: sns.ITopic | None = None
        self.subscription_dead_letter_queue: sqs.Queue | None = None
        self.subscription: sns.Subscription | None = None
        if with_topic:
            if topic is None:
                topic = sns.Topic(
                    self,
                    "Topic",
                    fifo=fifo_or_none,
                    content_based_deduplication=content_based_deduplication,
                    master_key=topic_key,
                    enforce_ssl=True,
                )
                _compat.tls_only_topic(topic)
                if high:
                    _compat.message_group_throughput(topic)
            elif key is not None and not _restricts_queue_key(topic):
                warn(
                    self,
                    "idempotent-pipeline:unrestricted-queue-key",
                    UNRESTRICTED_KEY_WARNING.format(flag=SQS_KEY_FOR_THIS_TOPIC_ONLY),
                )
            self.topic = topic
            # SNS delivers a FIFO topic's failures only to a FIFO queue.
            subscription_fifo = True if (topic_fifo if topic_fifo is not None else fifo) else None
            # The subscription's DLQ is where SNS puts what it cannot deliver to the queue, a key it cannot
            # use included. With a key of the app (whose policy is written here) it is encrypted like the
            # other queues; with an imported key, whose policy may lack SNS or which may be disabled, it would
            # fail for the same reason as the queue and SNS would drop the message: SSE-SQS instead, which
            # SNS can always write to.
            own_key = key if not _keys.is_imported(key) else None
            self.subscription_dead_letter_queue = sqs.Queue(
                self,
                "SubscriptionDeadLetterQueue",
                fifo=subscription_fifo,
                content_based_deduplication=subscription_fifo,
                retention_period=options.dead_letter_retention_period,
                encryption=sqs.QueueEncryption.KMS
                if own_key is not None
                else sqs.QueueEncryption.SQS_MANAGED,
                encryption_master_key=own_key,
                enforce_ssl=True,
                removal_policy=retained,
                deduplication_scope=group_scope,
                fifo_throughput_limit=group_limit,
            )
            _compat.acknowledge(
                self.subscription_dead_letter_queue, "AwsSolutions-SQS3", SUBSCRIPTION_DLQ_NAG_REASON
            )
            # SqsSubscription adds the queue policy statements allowing sqs:SendMessage from this topic only
            # (aws:SourceArn), on the queue and on the subscription's dead-letter queue, and for a key defined
            # in the app the key policy statement SNS needs (both queues then use that key).
            self.subscription = topic.add_subscription(
                subscriptions.SqsSubscription(
                    self.queue,
                    raw_message_delivery=True,
                    filter_policy=dict(options.filter_policy) if options.filter_policy else None,
                    dead_letter_queue=self.subscription_dead_letter_queue,
                )
            )
            # SqsSubscription waits for the queue's policy, not for the statement it adds to the dead-letter
            # queue's: until that exists, SNS cannot move an undeliverable message there and drops it.
            # (enforce_ssl made the queue's policy, construct id "Policy", when the queue was created.)
            self.subscription.node.add_dependency(
                self.subscription_dead_letter_queue.node.find_child("Policy")
            )
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
            if topic_key is not None:
                _keys.require_statement(
                    self,
                    topic_key,
                    warning_id=_keys.TOPIC_KEY_WARNING,
                    prop="MessagingOptions.topic_encryption_key",
                    statement=_keys.PRODUCERS_STATEMENT,
                    consequence="publishers cannot publish to the topic",
                )
        elif key is not None:
            _keys.require_statement(
                self,
                key,
                warning_id=_keys.QUEUE_KEY_WARNING,
                prop="MessagingOptions.encryption_key",
                statement=_keys.PRODUCERS_STATEMENT,
                consequence="producers cannot send to the queue",
            )

        # -- alarms -------------------------------------------------------------------------------------
        self.dead_letter_queue_alarm: cloudwatch.Alarm | None = None
        self.subscription_dead_letter_queue_alarm: cloudwatch.Alarm | None = None
        self.notifications_failed_alarm: cloudwatch.Alarm | None = None
        self.notifications_failed_to_redrive_alarm: cloudwatch.Alarm | None = None
        self.message_age_alarm: cloudwatch.Alarm | None = None
        if alarms.enabled:
            self.dead_letter_queue_alarm = alarms.alarm(
                self,
                "DeadLetterQueueAlarm",
                _visible(self.dead_letter_queue),
                threshold=1,
                description="messages the pipeline could not process are waiting in the dead-letter queue",
            )
            if self.subscription_dead_letter_queue is not None and self.topic is not None:
                self.subscription_dead_letter_queue_alarm = alarms.alarm(
                    self,
                    "SubscriptionDeadLetterQueueAlarm",
                    _visible(self.subscription_dead_letter_queue),
                    threshold=1,
                    description="messages SNS could not deliver to the queue are waiting in the "
                    "subscription's dead-letter queue",
                )
                self.notifications_failed_alarm = alarms.alarm(
                    self,
                    "NotificationsFailedAlarm",
                    self.topic.metric_number_of_notifications_failed(period=ONE_MINUTE, statistic="Sum"),
                    threshold=1,
                    description="SNS failed to deliver messages to the queue (see the subscription's "
                    "dead-letter queue)",
                )
                self.notifications_failed_to_redrive_alarm = alarms.alarm(
                    self,
                    "NotificationsFailedToRedriveAlarm",
                    self.topic.metric(REDRIVE_FAILED_METRIC, period=ONE_MINUTE, statistic="Sum"),
                    threshold=1,
                    description="SNS could deliver messages neither to the queue nor to the subscription's "
                    "dead-letter queue, and dropped them",
                )
            self.message_age_alarm = alarms.alarm(
                self,
                "MessageAgeAlarm",
                self.queue.metric_approximate_age_of_oldest_message(period=ONE_MINUTE, statistic="Maximum"),
                threshold=alarms.max_message_age,
                description="the oldest message in the queue is older than expected: the consumer lags",
            )
        self.alarms: tuple[cloudwatch.Alarm, ...] = tuple(
            alarm
            for alarm in (
                self.dead_letter_queue_alarm,
                self.subscription_dead_letter_queue_alarm,
                self.notifications_failed_alarm,
                self.notifications_failed_to_redrive_alarm,
                self.message_age_alarm,
            )
            if alarm is not None
        )

    def grant_publish(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to put messages into the pipeline: ``sns:Publish`` on the topic (and its key), or
        with no topic ``sqs:SendMessage`` on the queue (and its key)."""
        if self.topic is not None:
            return self.topic.grant_publish(grantee)
        return self.queue.grant_send_messages(grantee)


def _topic_fifo(topic: sns.ITopic | None) -> bool | None:
    """The topic's type, or None when it cannot be known at synth (imported from a deploy-time ARN)."""
    if topic is None:
        return None
    fifo = bool(topic.fifo)
    if not fifo and not isinstance(topic, sns.Topic) and is_token(topic.topic_arn):
        return None
    return fifo


def _restricts_queue_key(topic: sns.ITopic) -> bool:
    from aws_cdk import FeatureFlags

    return bool(FeatureFlags.of(topic).is_enabled(SQS_KEY_FOR_THIS_TOPIC_ONLY))


def _visible(queue: sqs.IQueue) -> cloudwatch.IMetric:
    return queue.metric_approximate_number_of_messages_visible(period=ONE_MINUTE, statistic="Maximum")
