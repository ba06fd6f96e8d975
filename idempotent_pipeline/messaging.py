"""FifoMessaging: SNS FIFO topic -> SQS FIFO queue (raw delivery) with a FIFO dead-letter queue."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Annotations, Duration, FeatureFlags, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from idempotent_pipeline._checks import (
    ConfigurationError,
    generated_fifo_queue_name,
    require_fifo_queue,
    require_fifo_topic,
    require_int_range,
    seconds,
)

DEFAULT_MAX_RECEIVE_COUNT = 5
DEFAULT_VISIBILITY_TIMEOUT = Duration.minutes(3)  # 6 x the consumer's default 30 s function timeout
DEFAULT_RETENTION_PERIOD = Duration.days(4)
DEFAULT_DEAD_LETTER_RETENTION_PERIOD = Duration.days(14)

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


class FifoMessaging(Construct):
    """An SNS FIFO topic delivering raw messages to an SQS FIFO queue that redrives to a FIFO DLQ.

    Both queues deny non-TLS access; the queue accepts ``sqs:SendMessage`` only from the topic
    (``aws:SourceArn``); a new topic denies non-TLS publishing. The queues get generated physical names
    ending in ``.fifo``.

    :param topic: an existing FIFO topic to subscribe the queue to. Default: a new FIFO topic.
    :param content_based_deduplication: deduplicate by a SHA-256 of the body when a publisher sends no
        ``MessageDeduplicationId`` (new topic and queue). Default: True.
    :param high_throughput: high-throughput FIFO: per-message-group throughput and deduplication scope on the
        queue, message-group throughput scope on a new topic. Default: False (queue-wide scope).
    :param visibility_timeout: the queue's visibility timeout; keep it at least 6 x the consumer's function
        timeout. Default: 3 minutes (6 x the consumer's default 30 s timeout).
    :param retention_period: how long the queue keeps a message. Default: 4 days.
    :param dead_letter_retention_period: how long the DLQ keeps a message. Default: 14 days (the maximum).
    :param max_receive_count: receives before a message moves to the DLQ. Default: 5.
    :param dead_letter_queue: an existing FIFO queue to use as the DLQ. Default: a new FIFO DLQ.
    :param encryption_key: a customer-managed KMS key for the queue and a new DLQ; the key policy statement
        SNS needs to deliver (limited to this topic by ``aws:SourceArn``) is added to a key defined in the
        app.
        Default: SSE-SQS.
    :param topic_encryption_key: a customer-managed KMS key for a new topic. It cannot be ``encryption_key``:
        that key's policy names the topic, and the topic would name the key (a dependency cycle).
        Default: the topic is not encrypted with KMS.
    :param filter_policy: an SNS subscription filter policy. Allowed, but it voids SNS FIFO's exactly-once
        delivery conditions, so a synth warning says so. Default: no filter.
    :param removal_policy: what happens to the queues when removed from the stack. Default: DESTROY (messages
        are transient; the table holds the data).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        topic: sns.ITopic | None = None,
        content_based_deduplication: bool = True,
        high_throughput: bool = False,
        visibility_timeout: Duration | None = None,
        retention_period: Duration | None = None,
        dead_letter_retention_period: Duration | None = None,
        max_receive_count: int = DEFAULT_MAX_RECEIVE_COUNT,
        dead_letter_queue: sqs.IQueue | None = None,
        encryption_key: kms.IKey | None = None,
        topic_encryption_key: kms.IKey | None = None,
        filter_policy: Mapping[str, sns.SubscriptionFilter] | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    ) -> None:
        super().__init__(scope, id)
        # Whatever the app's cdk.json says: SNS's use of the queue key is limited to this topic. CDK reads the
        # flag from the topic's scope, so this covers the topic created here (an existing one: see below).
        self.node.set_context(SQS_KEY_FOR_THIS_TOPIC_ONLY, True)
        require_int_range("max_receive_count", max_receive_count, 1, 1000)
        if topic is not None:
            require_fifo_topic("topic", topic)
        if dead_letter_queue is not None:
            require_fifo_queue("dead_letter_queue", dead_letter_queue)
        if topic_encryption_key is not None and topic_encryption_key is encryption_key:
            raise ConfigurationError(
                "topic_encryption_key must be a different key than encryption_key: the queue key's policy "
                "names the topic, so one key for both is a dependency cycle; got the same key "
                f"{topic_encryption_key.node.path}"
            )
        if topic_encryption_key is not None and topic is not None:
            raise ConfigurationError(
                "topic_encryption_key applies only to a new topic; encrypt the existing topic where it is "
                f"defined (got topic {topic.node.path})"
            )
        visibility_timeout = visibility_timeout or DEFAULT_VISIBILITY_TIMEOUT
        visibility = seconds("visibility_timeout", visibility_timeout)
        if visibility is not None and visibility > 12 * 60 * 60:
            raise ConfigurationError(f"visibility_timeout must be at most 12 hours; got {visibility} seconds")

        encryption = (
            sqs.QueueEncryption.KMS if encryption_key is not None else sqs.QueueEncryption.SQS_MANAGED
        )
        self.encryption_key = encryption_key
        if dead_letter_queue is None:
            dead_letter_queue = sqs.Queue(
                self,
                "DeadLetterQueue",
                fifo=True,
                content_based_deduplication=True,
                retention_period=dead_letter_retention_period or DEFAULT_DEAD_LETTER_RETENTION_PERIOD,
                encryption=encryption,
                encryption_master_key=encryption_key,
                enforce_ssl=True,
                removal_policy=removal_policy,
            )
            _name_fifo_queue(dead_letter_queue)
        self.dead_letter_queue: sqs.IQueue = dead_letter_queue
        self.max_receive_count = max_receive_count

        self.queue = sqs.Queue(
            self,
            "Queue",
            fifo=True,
            content_based_deduplication=content_based_deduplication,
            visibility_timeout=visibility_timeout,
            retention_period=retention_period or DEFAULT_RETENTION_PERIOD,
            encryption=encryption,
            encryption_master_key=encryption_key,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=dead_letter_queue, max_receive_count=max_receive_count
            ),
            removal_policy=removal_policy,
            deduplication_scope=sqs.DeduplicationScope.MESSAGE_GROUP if high_throughput else None,
            fifo_throughput_limit=sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID if high_throughput else None,
        )
        _name_fifo_queue(self.queue)

        if topic is None:
            topic = sns.Topic(
                self,
                "Topic",
                fifo=True,
                content_based_deduplication=content_based_deduplication,
                fifo_throughput_scope=sns.FifoThroughputScope.MESSAGE_GROUP if high_throughput else None,
                master_key=topic_encryption_key,
                enforce_ssl=True,
            )
        self.topic: sns.ITopic = topic
        if encryption_key is not None and not FeatureFlags.of(topic).is_enabled(SQS_KEY_FOR_THIS_TOPIC_ONLY):
            Annotations.of(self).add_warning_v2(
                "idempotent-pipeline:unrestricted-queue-key",
                UNRESTRICTED_KEY_WARNING.format(flag=SQS_KEY_FOR_THIS_TOPIC_ONLY),
            )

        # SqsSubscription adds the queue policy statement allowing sqs:SendMessage from this topic only
        # (aws:SourceArn) and, for a customer-managed key, the key policy statement SNS needs.
        self.subscription_filter_policy = dict(filter_policy) if filter_policy else None
        topic.add_subscription(
            subscriptions.SqsSubscription(
                self.queue, raw_message_delivery=True, filter_policy=self.subscription_filter_policy
            )
        )
        if self.subscription_filter_policy:
            Annotations.of(self).add_warning_v2("idempotent-pipeline:filter-policy", FILTER_POLICY_WARNING)

    def grant_publish(self, grantee: iam.IGrantable) -> iam.Grant:
        """Allow ``grantee`` to publish to the topic (and use its key, if encrypted)."""
        return self.topic.grant_publish(grantee)


def _name_fifo_queue(queue: sqs.Queue) -> None:
    cfn = queue.node.default_child
    assert isinstance(cfn, sqs.CfnQueue)
    cfn.queue_name = generated_fifo_queue_name(queue)
