"""The options of each building block, declared and documented once (as aws-cdk-lib's ``TableOptions``).

Every block takes the resources it works with by reference plus one of these frozen dataclasses; the
composite :class:`~idempotent_pipeline.IdempotentPipeline` takes the same objects. Names and defaults shared
with the runtime come from :mod:`idempotent_runtime.contract`. ``docs/constructs.md`` is the reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from idempotent_runtime import contract
from idempotent_runtime.contract import KeySource, LogLevel, Mode, OnConflict

from idempotent_pipeline._rules import duration

# Defaults that are Durations: created once, recognised by identity (no jsii round trip to read them back).
DEFAULT_VISIBILITY_TIMEOUT = duration(180)  # 6 x the consumer's default 30 s function timeout
DEFAULT_RETENTION_PERIOD = duration(4 * 24 * 3600)
DEFAULT_DEAD_LETTER_RETENTION_PERIOD = duration(contract.SQS_MAX_RETENTION_SECONDS)
DEFAULT_TIMEOUT = duration(30)
DEFAULT_DEDUP_TTL = duration(contract.DEDUP_TTL_SECONDS.default)
DEFAULT_LEASE_MARGIN = duration(contract.LEASE_MARGIN_SECONDS.default)
DEFAULT_MAX_MESSAGE_AGE = duration(600)
DEFAULT_FAILED_PERIOD = duration(300)
# The function's Python, pinned here (not aws-cdk-lib's newest, which moves with every upgrade of it): it also
# chooses the wheels installed for requirements.txt. Built from its name, so any aws-cdk-lib can express it.
DEFAULT_PYTHON_VERSION = "3.14"
DEFAULT_RUNTIME = lambda_.Runtime(f"python{DEFAULT_PYTHON_VERSION}", lambda_.RuntimeFamily.PYTHON)
DEFAULT_ARCHITECTURE = lambda_.Architecture.ARM_64  # read once: each read of the static is a round trip
# The removal policies of queues and tables: every one but SNAPSHOT, which neither has.
WITHOUT_SNAPSHOT = (RemovalPolicy.DESTROY, RemovalPolicy.RETAIN, RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE)


@dataclass(frozen=True, kw_only=True)
class MessagingOptions:
    """How messages reach the consumer: topic, queue, dead-letter queues (:class:`Messaging`)."""

    fifo: bool = True
    """FIFO topic, queue and dead-letter queues: ordered per MessageGroupId, deduplicated for 5 minutes.
    False: a standard topic and standard queues (no ordering, no deduplication window, higher throughput;
    the runtime runs every record independently). Default: True."""

    with_topic: bool = True
    """Subscribe the queue to an SNS topic (a new one, or the ``topic`` given to the construct). False: no
    topic and no subscription; producers send to the queue directly (``grant_publish`` grants
    ``sqs:SendMessage``). Default: True."""

    content_based_deduplication: bool | None = None
    """FIFO only: deduplicate by a SHA-256 of the body when a producer sends no MessageDeduplicationId (new
    topic and queue). Default: True on FIFO; not available on standard queues (True is refused there, False
    leaves the attribute out: SQS and SNS refuse it on a standard queue or topic)."""

    high_throughput: bool = False
    """FIFO only: per-message-group deduplication scope and throughput limit on the queue and on both
    dead-letter queues created here (a redrive burst into a DLQ at the default FIFO limit is throttled),
    message-group throughput scope on a new topic. Default: False (queue-wide scope)."""

    visibility_timeout: Duration | None = None
    """The queue's visibility timeout; at least 6 x the consumer's function timeout + its
    ``max_batching_window``. Default: 3 minutes (:class:`IdempotentPipeline`: 6 x the consumer's timeout +
    its batching window)."""

    retention_period: Duration = DEFAULT_RETENTION_PERIOD
    """How long the queue keeps a message (1 minute to 14 days); longer than the visibility timeout and the
    message-age alarm's threshold, and best at least max_receive_count x visibility_timeout (synth warns
    otherwise: a message can expire before reaching the dead-letter queue). Default: 4 days."""

    dead_letter_retention_period: Duration = DEFAULT_DEAD_LETTER_RETENTION_PERIOD
    """How long the dead-letter queues keep a message (1 minute to 14 days); longer than ``retention_period``
    on standard queues, where SQS keeps a message's enqueue time when it dead-letters it (on FIFO, where the
    clock restarts, a shorter one is a warning). Default: 14 days."""

    max_receive_count: int = 5
    """Receives before SQS moves a message to the dead-letter queue (1 to 1000). The consumer is told, so a
    record failing on its last receive reaches the DLQ with a reason. Default: 5."""

    encryption_key: kms.IKey | None = None
    """A customer-managed KMS key for the queue and the dead-letter queues. The key policy statement SNS needs
    (limited to this topic) is added to a key defined in the app; an imported key gets a synth warning
    naming it, and the subscription's dead-letter queue then uses SSE-SQS (SNS can always write there, so a
    key SNS cannot use does not lose messages). Default: SSE-SQS."""

    topic_encryption_key: kms.IKey | None = None
    """A customer-managed KMS key for a new topic; not ``encryption_key`` (that key's policy names the topic:
    a dependency cycle). Default: the topic is not encrypted with KMS."""

    filter_policy: Mapping[str, sns.SubscriptionFilter] | None = None
    """An SNS subscription filter policy. On FIFO it voids SNS's exactly-once delivery conditions, so synth
    warns. Default: none."""

    removal_policy: RemovalPolicy = RemovalPolicy.DESTROY
    """Of the source queue (messages in flight). Default: DESTROY."""

    dead_letter_removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    """Of the dead-letter queues created here: dead letters are unprocessed user data. Default: RETAIN."""


# cdk.json context flag: True names every IdempotencyTable explicitly unless TableOptions.table_name does (a
# change that would replace the table then fails the deploy); False keeps CloudFormation's generated name (a
# stack deployed with 0.2 keeps its table); unset keeps it too, with a synth warning.
EXPLICIT_TABLE_NAME_FLAG = "@idempotent-pipeline:explicitTableName"


@dataclass(frozen=True, kw_only=True)
class TableOptions:
    """The DynamoDB table (:class:`IdempotencyTable`). Changing a key name replaces the table: with an
    explicit name, CloudFormation refuses that and the deploy fails."""

    table_name: str | None = None
    """The table's physical name (3 to 255 of ``A-Z a-z 0-9 _ . -``). With an explicit name a change that
    replaces the table (a key name) fails the deploy instead of writing to a new, empty table; a new
    ``table_name`` is how to replace it on purpose (with RETAIN the old table and its data stay). Default:
    with the context flag ``@idempotent-pipeline:explicitTableName`` true, a name derived from the stack and
    the construct path (``Names.unique_resource_name``); otherwise CloudFormation's generated name."""

    partition_key_name: str = contract.PARTITION_KEY.default
    """The partition key attribute (string). Default: ``pk``."""

    sort_key_name: str = contract.SORT_KEY.default
    """The sort key attribute (string). Default: ``sk``."""

    time_to_live_attribute: str = contract.TTL_ATTRIBUTE.default
    """The TTL attribute (epoch seconds). Changing it on a deployed table needs a migration (TTL must be
    disabled first). Default: ``expires_at``."""

    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    """RETAIN or DESTROY (DynamoDB tables do not support SNAPSHOT). Default: RETAIN (it holds user data)."""

    point_in_time_recovery: bool = True
    """Continuous backups. Default: True."""

    encryption_key: kms.IKey | None = None
    """A customer-managed KMS key. Default: the AWS-owned key DynamoDB uses by default."""

    deletion_protection: bool = False
    """Refuse DeleteTable. Default: False."""


@dataclass(frozen=True, kw_only=True)
class ConsumerOptions:
    """The Lambda function that runs the bundled runtime (:class:`IdempotentConsumer`)."""

    mode: Mode | str = contract.IDEMPOTENCY_MODE.default
    """``document`` (one conditional put of the message's document), ``transaction`` (your writes and an
    idempotency marker in one transaction), ``guarded`` (a fenced lease around an effect outside
    DynamoDB) or ``versioned`` (the latest state per entity: one put, conditional on a newer version; needs
    ``version_field``). Default: ``document``."""

    key_source: KeySource | str = contract.KEY_SOURCE.default
    """Where a record's idempotency key comes from: ``fields`` (two body fields), ``field`` (one body field,
    ``partition_key_field``: the sort key holds its path), ``dedup_id`` (the FIFO MessageDeduplicationId;
    FIFO only), ``message_id`` (the SQS messageId) or ``body_sha256``. Default:
    ``fields`` on FIFO and standard queues alike: SNS delivers a duplicate to SQS as a new SQS message with a
    new messageId, so ``message_id`` only catches SQS's own redeliveries."""

    partition_key_field: str | None = None
    """The body field (a dotted path such as ``order.id``) whose value becomes the partition key: with
    ``key_source="fields"`` set together with ``sort_key_field`` (one without the other is refused at
    synth), with ``"field"`` alone (required). Default: ``x`` when neither key field is set."""

    sort_key_field: str | None = None
    """With ``key_source="fields"``, set together with ``partition_key_field``: the body field (a dotted
    path) whose value becomes the sort key. Default: ``y`` when neither key field is set."""

    key_prefix: str = contract.KEY_PREFIX.default
    """Prepended to every partition key value, so several pipelines can share one table; must not begin
    with ``idempotency#``, at most 1024 bytes. Default: none."""

    fingerprint_fields: Sequence[str] | None = None
    """The payload fingerprint (which tells a conflict from a duplicate) covers only these dotted paths.
    Default: the whole body."""

    fingerprint_exclude: Sequence[str] | None = None
    """The payload fingerprint covers the body without these dotted paths (e.g. a timestamp a producer sets
    per send); not with ``fingerprint_fields``. Default: none excluded."""

    on_conflict: OnConflict | str = contract.ON_CONFLICT.default
    """What a delivery whose key is done with a different fingerprint becomes: ``quarantine`` (the DLQ, with
    both fingerprints in the reason) or ``duplicate`` (logged at WARNING and counted). Default:
    ``quarantine``."""

    dedup_ttl: Duration | None = DEFAULT_DEDUP_TTL
    """Lifetime of the records that exist only for idempotency (transaction markers, guarded claims and
    results); how long duplicates are recognised in those modes. None (or 0 seconds, as the runtime's 0):
    never expire. Default: 7 days."""

    document_ttl: Duration | None = None
    """Document mode: lifetime of the stored documents (duplicates are recognised for as long as the
    document exists). None (or 0 seconds, as the runtime's 0): never expire. Default: None."""

    lease_duration: Duration | None = None
    """Guarded mode: how long a claim is held. Default: the invocation's remaining time."""

    lease_margin: Duration = DEFAULT_LEASE_MARGIN
    """Guarded mode: a claim is recorded as held this much longer than its owner uses it, so a clock that
    runs ahead elsewhere cannot take over a live claim. Default: 10 seconds."""

    version_field: str | None = None
    """Versioned mode (required there): the body field (a dotted path) holding each message's version, a
    number or an RFC 3339 timestamp with its UTC offset. Default: none."""

    tombstone_ttl: Duration | None = None
    """Versioned mode: lifetime of a deleted entity's tombstone (an older version arriving after it expired
    creates the entity again). None (or 0 seconds, as the runtime's 0): never expire. Default: None."""

    processor: str | None = None
    """Your function, ``module:function`` (or ``module:Class.method``), in ``code_directory``; checked at
    synth by reading the module. Required for ``transaction`` and ``guarded``. Default: none."""

    code_directory: str | None = None
    """The directory holding the processor's module. Its Python sources (``*.py``) and what ``include``
    names ship beside ``idempotent_runtime/`` in the asset; hidden files and directories, virtualenvs,
    ``node_modules``, ``cdk.out`` and caches never do, and synth warns naming other files it left out. A
    ``requirements.txt`` in it is installed into the asset at synth (wheels only, for the function's
    architecture and Python), never shipped. Default: none."""

    include: Sequence[str] = ()
    """Files of ``code_directory`` to ship besides its Python sources (data the function reads): a pattern
    without ``/`` matches a file or directory name anywhere (``*.json``, ``data``: a directory ships with
    everything below it), one with ``/`` a path relative to ``code_directory`` (``templates/*.html``; ``*``
    stays within a directory, ``**`` spans directories). Default: none."""

    exclude: Sequence[str] = ()
    """Patterns left out of the asset, even when a Python source or named by ``include`` (same syntax as
    ``include``: ``tests``, ``docs/*.md``). Default: none."""

    timeout: Duration = DEFAULT_TIMEOUT
    """The function timeout (1 to 900 seconds). Default: 30 seconds."""

    memory_size: int = 256
    """MiB of memory (128 to 10240). Default: 256."""

    architecture: lambda_.Architecture | None = None
    """The instruction set. Default: ARM_64."""

    runtime: lambda_.Runtime = DEFAULT_RUNTIME
    """The function's Python runtime, python3.12 or later (Amazon Linux 2023); the wheels of
    ``requirements.txt`` are installed for its version. Default: python3.14, pinned by this package, so
    upgrading aws-cdk-lib never changes it."""

    batch_size: int = 10
    """Records per invocation: 1 to 10 on FIFO, 1 to 10,000 on standard (above 10 needs
    ``max_batching_window``). Default: 10."""

    max_batching_window: Duration | None = None
    """Standard queues only: how long the event source gathers records into a batch (up to 5 minutes).
    Default: none."""

    max_concurrency: int | None = None
    """The event source's maximum concurrent invocations (2 to 1000). Default: no limit."""

    reserved_concurrent_executions: int | None = None
    """The function's reserved concurrency. Prefer ``max_concurrency``: throttled receives count toward the
    queue's max receives. Default: unreserved."""

    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    """How long the function's log group keeps logs. Default: one month."""

    log_encryption_key: kms.IKey | None = None
    """A customer-managed KMS key for the function's log group and its relay's: their lines hold message
    ids, key values and reasons quoting the body. The key policy statement CloudWatch Logs needs is added to
    a key defined in the app; an imported key gets a synth warning naming it. Default: CloudWatch Logs'
    own encryption."""

    max_workers: int | None = None
    """Threads processing different message groups of one batch (1 to 64). Default: the runtime's (10)."""

    metrics_namespace: str = contract.METRICS_NAMESPACE.default
    """CloudWatch namespace of the runtime's metrics (and of the alarms on them). Default:
    ``IdempotentPipeline``."""

    log_level: LogLevel | str | None = None
    """``DEBUG`` (every record), ``INFO``, ``WARNING`` or ``ERROR``. Default: the runtime's (``INFO``)."""

    environment: Mapping[str, str] | None = None
    """Extra environment variables for your processor; may not set the runtime's own. Default: none."""

    vpc: ec2.IVpc | None = None
    """Run the function in this VPC (it needs a route to DynamoDB and SQS: NAT or VPC endpoints). The role
    gets the network-interface actions Lambda needs, without a managed policy. Default: no VPC."""

    vpc_subnets: ec2.SubnetSelection | None = None
    """With ``vpc``: the subnets. Default: the VPC's private subnets."""

    security_groups: Sequence[ec2.ISecurityGroup] | None = None
    """With ``vpc``: the function's security groups. Default: a new one allowing all outbound traffic."""

    tracing: lambda_.Tracing | None = None
    """X-Ray tracing (``Tracing.ACTIVE``): the role gets ``xray:PutTraceSegments`` and
    ``xray:PutTelemetryRecords``. Default: disabled."""

    layers: Sequence[lambda_.ILayerVersion] = field(default_factory=tuple)
    """Lambda layers (their size counts toward the 250 MB limit). Default: none."""


@dataclass(frozen=True, kw_only=True)
class AlarmOptions:
    """The CloudWatch alarms every block creates for what it owns."""

    enabled: bool = True
    """Create the alarms. Default: True."""

    alarm_topic: sns.ITopic | None = None
    """An SNS topic notified when an alarm fires (and when it is OK again). A topic defined in the app gets
    the topic policy statement that lets CloudWatch alarms of its account publish, and for a KMS key of the
    app the key policy statement CloudWatch needs; an imported topic or key gets a synth warning naming the
    statement. Default: no action."""

    max_message_age: Duration = DEFAULT_MAX_MESSAGE_AGE
    """Alarm when the oldest message in the queue is this old (at least 1 minute, less than the queue's
    retention). Default: 10 minutes."""

    failed_threshold: int = 10
    """Alarm when this many records failed (and were left for SQS to retry) within ``failed_period``.
    Default: 10."""

    failed_period: Duration = DEFAULT_FAILED_PERIOD
    """The window of ``failed_threshold`` (a whole number of minutes, at most 7 days; known at synth).
    Default: 5 minutes."""
