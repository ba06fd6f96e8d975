"""IdempotentPipeline: the blocks wired together, attributes, grant_publish, alarms, metrics and dashboard."""

from __future__ import annotations

import inspect
import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Duration, assertions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs_helpers import (
    actions_of,
    alarms_of,
    built_alone,
    cloudwatch_may_publish,
    env_of,
    logical_id,
    nag_findings,
    new_stack,
    only,
    policy_statements,
    resources,
    synth_with_nag,
    warnings_of,
)

from idempotent_pipeline import (
    AlarmOptions,
    ConfigurationError,
    ConsumerOptions,
    IdempotencyTable,
    IdempotentConsumer,
    IdempotentPipeline,
    Messaging,
    MessagingOptions,
    TableOptions,
)


@pytest.fixture(scope="session")
def built() -> tuple[IdempotentPipeline, assertions.Template]:
    return built_alone(IdempotentPipeline, "Pipeline")


@pytest.fixture(scope="session")
def template(built) -> assertions.Template:
    return built[1]


def test_exposes_the_resources_users_wire_further(built):
    pipeline, _ = built
    assert isinstance(pipeline.messaging, Messaging)
    assert isinstance(pipeline.idempotency_table, IdempotencyTable)
    assert isinstance(pipeline.consumer, IdempotentConsumer)
    assert pipeline.topic is pipeline.messaging.topic is not None
    assert pipeline.queue is pipeline.messaging.queue
    assert pipeline.dead_letter_queue is pipeline.messaging.dead_letter_queue
    assert pipeline.subscription_dead_letter_queue is pipeline.messaging.subscription_dead_letter_queue
    assert pipeline.table is pipeline.idempotency_table.table
    assert pipeline.function is pipeline.consumer.function
    assert pipeline.alarms == (*pipeline.messaging.alarms, *pipeline.consumer.alarms)
    assert len(pipeline.alarms) == 10
    assert pipeline.dashboard is None


def test_construct_ids_are_stable(built):
    pipeline, _ = built
    paths = {c.node.path for c in pipeline.node.find_all()}
    assert {
        "TestStack/Pipeline/Messaging/Topic",
        "TestStack/Pipeline/Messaging/Queue",
        "TestStack/Pipeline/Messaging/DeadLetterQueue",
        "TestStack/Pipeline/Messaging/SubscriptionDeadLetterQueue",
        "TestStack/Pipeline/Table/Table",
        "TestStack/Pipeline/Consumer/Function",
        "TestStack/Pipeline/Consumer/Role",
        "TestStack/Pipeline/Consumer/LogGroup",
        "TestStack/Pipeline/Messaging/DeadLetterQueueAlarm",
        "TestStack/Pipeline/Messaging/SubscriptionDeadLetterQueueAlarm",
        "TestStack/Pipeline/Messaging/NotificationsFailedAlarm",
        "TestStack/Pipeline/Messaging/NotificationsFailedToRedriveAlarm",
        "TestStack/Pipeline/Messaging/MessageAgeAlarm",
        "TestStack/Pipeline/Consumer/FailedAlarm",
        "TestStack/Pipeline/Consumer/QuarantinedAlarm",
        "TestStack/Pipeline/Consumer/ConflictsAlarm",
        "TestStack/Pipeline/Consumer/MisconfiguredAlarm",
        "TestStack/Pipeline/Consumer/ErrorsAlarm",
    } <= paths


def test_topic_feeds_queue_feeds_function_writes_table(template):
    topic_id = logical_id(template, "AWS::SNS::Topic", "Topic")
    queue_id = logical_id(template, "AWS::SQS::Queue", "MessagingQueue")
    dlq_id = logical_id(template, "AWS::SQS::Queue", "MessagingDeadLetterQueue")
    table_id = logical_id(template, "AWS::DynamoDB::Table", "Table")
    function_id = logical_id(template, "AWS::Lambda::Function", "Function")
    subscription = only(template, "AWS::SNS::Subscription")["Properties"]
    assert (subscription["TopicArn"], subscription["Endpoint"]) == (
        {"Ref": topic_id},
        {"Fn::GetAtt": [queue_id, "Arn"]},
    )
    mapping = only(template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert (mapping["EventSourceArn"], mapping["FunctionName"]) == (
        {"Fn::GetAtt": [queue_id, "Arn"]},
        {"Ref": function_id},
    )
    env = env_of(template)
    assert (env["TABLE_NAME"], env["DLQ_URL"], env["MAX_RECEIVE_COUNT"]) == (
        {"Ref": table_id},
        {"Ref": dlq_id},
        "5",
    )


def test_visibility_timeout_is_six_times_the_function_timeout(template, synth):
    queue = resources(template, "AWS::SQS::Queue")[logical_id(template, "AWS::SQS::Queue", "MessagingQueue")]
    assert queue["Properties"]["VisibilityTimeout"] == 6 * 30
    custom = synth(
        lambda s: IdempotentPipeline(s, "P", consumer_options=ConsumerOptions(timeout=Duration.seconds(50)))
    )
    queue = resources(custom, "AWS::SQS::Queue")[logical_id(custom, "AWS::SQS::Queue", "PMessagingQueue")]
    assert queue["Properties"]["VisibilityTimeout"] == 300


def _standard(synth: Any, id: str, **consumer: Any) -> assertions.Template:
    """A pipeline of standard queues whose consumer has these options."""
    return synth(
        lambda s: IdempotentPipeline(
            s,
            id,
            messaging_options=MessagingOptions(fifo=False),
            consumer_options=ConsumerOptions(**consumer),
        )
    )


def test_visibility_timeout_default_adds_the_batching_window(synth):
    template = _standard(synth, "P", batch_size=1000, max_batching_window=Duration.minutes(5))
    queue = resources(template, "AWS::SQS::Queue")[logical_id(template, "AWS::SQS::Queue", "PMessagingQueue")]
    assert queue["Properties"]["VisibilityTimeout"] == 6 * 30 + 300


def test_token_batching_window_needs_an_explicit_visibility_timeout():
    stack = new_stack()
    window = Duration.seconds(cdk.CfnParameter(stack, "Window", type="Number").value_as_number)
    with pytest.raises(ConfigurationError, match=r"^MessagingOptions.visibility_timeout is required when"):
        IdempotentPipeline(
            stack,
            "Pipeline",
            messaging_options=MessagingOptions(fifo=False),
            consumer_options=ConsumerOptions(max_batching_window=window),
        )


def test_visibility_timeout_below_six_times_the_timeout_is_rejected():
    with pytest.raises(
        ConfigurationError,
        match=r"^visibility_timeout of queue TestStack/Pipeline/Messaging/Queue must be at least 6 x the "
        r"function timeout \(30 seconds\) = 180 seconds; got 120 seconds$",
    ):
        IdempotentPipeline(
            new_stack(),
            "Pipeline",
            messaging_options=MessagingOptions(visibility_timeout=Duration.minutes(2)),
        )


def test_token_timeout_needs_an_explicit_visibility_timeout():
    stack = new_stack()
    timeout = Duration.seconds(cdk.CfnParameter(stack, "TimeoutSeconds", type="Number").value_as_number)
    with pytest.raises(ConfigurationError, match=r"^MessagingOptions.visibility_timeout is required when"):
        IdempotentPipeline(stack, "Pipeline", consumer_options=ConsumerOptions(timeout=timeout))
    IdempotentPipeline(
        stack,
        "Pipeline2",
        consumer_options=ConsumerOptions(timeout=timeout),
        messaging_options=MessagingOptions(visibility_timeout=Duration.minutes(15)),
    )


def test_every_block_reads_its_own_options(synth, user_code):
    def build(stack: cdk.Stack) -> None:
        IdempotentPipeline(
            stack,
            "Pipeline",
            messaging_options=MessagingOptions(max_receive_count=2, high_throughput=True),
            table_options=TableOptions(partition_key_name="order_id", sort_key_name="line_id"),
            consumer_options=ConsumerOptions(
                partition_key_field="order.id",
                sort_key_field="line",
                mode="guarded",
                processor="orders:handle",
                code_directory=str(user_code),
                batch_size=4,
            ),
        )

    template = synth(build)
    table = only(template, "AWS::DynamoDB::Table")["Properties"]
    assert [k["AttributeName"] for k in table["KeySchema"]] == ["order_id", "line_id"]
    env = env_of(template)
    assert (env["PARTITION_KEY"], env["SORT_KEY"], env["PARTITION_KEY_FIELD"], env["SORT_KEY_FIELD"]) == (
        "order_id",
        "line_id",
        "order.id",
        "line",
    )
    assert (env["IDEMPOTENCY_MODE"], env["MAX_RECEIVE_COUNT"]) == ("guarded", "2")
    queue = resources(template, "AWS::SQS::Queue")[logical_id(template, "AWS::SQS::Queue", "MessagingQueue")]
    assert queue["Properties"]["FifoThroughputLimit"] == "perMessageGroupId"
    assert only(template, "AWS::Lambda::EventSourceMapping")["Properties"]["BatchSize"] == 4


def test_one_customer_managed_key_can_encrypt_queues_and_table(synth):
    def build(stack: cdk.Stack) -> None:
        key = kms.Key(stack, "Key", enable_key_rotation=True)
        IdempotentPipeline(
            stack,
            "Pipeline",
            messaging_options=MessagingOptions(encryption_key=key),
            table_options=TableOptions(encryption_key=key),
        )

    template = synth(build)
    key_arn = {"Fn::GetAtt": [logical_id(template, "AWS::KMS::Key", "Key"), "Arn"]}
    assert all(
        q["Properties"]["KmsMasterKeyId"] == key_arn for q in resources(template, "AWS::SQS::Queue").values()
    )
    assert (
        only(template, "AWS::DynamoDB::Table")["Properties"]["SSESpecification"]["KMSMasterKeyId"] == key_arn
    )
    key_actions = {a for s in policy_statements(template) if s["Resource"] == key_arn for a in actions_of(s)}
    # event source (decrypt received messages), DLQ sends, table writes
    assert key_actions == {"kms:Decrypt", "kms:GenerateDataKey", "kms:Encrypt"}


def test_grant_publish_returns_a_grant_on_the_topic(synth):
    grants: list[iam.Grant] = []

    def build(stack: cdk.Stack) -> None:
        publisher = iam.Role(stack, "Publisher", assumed_by=iam.AccountRootPrincipal())
        grants.append(IdempotentPipeline(stack, "Pipeline").grant_publish(publisher))

    template = synth(build)
    assert isinstance(grants[0], iam.Grant) and grants[0].success
    topic_id = logical_id(template, "AWS::SNS::Topic", "Topic")
    publisher = {"Ref": logical_id(template, "AWS::IAM::Role", "Publisher")}
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources(template, "AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [publisher]
    ]
    assert policies == [[{"Action": "sns:Publish", "Effect": "Allow", "Resource": {"Ref": topic_id}}]]


def test_existing_topic_and_dead_letter_queue_are_used(synth):
    topic_arn = "arn:aws:sns:eu-west-1:111122223333:orders.fifo"
    dlq_arn = "arn:aws:sqs:eu-west-1:111122223333:failures.fifo"

    def build(stack: cdk.Stack) -> None:
        pipeline = IdempotentPipeline(
            stack,
            "Pipeline",
            topic=sns.Topic.from_topic_arn(stack, "Orders", topic_arn),
            dead_letter_queue=sqs.Queue.from_queue_arn(stack, "Failures", dlq_arn),
        )
        assert pipeline.dead_letter_queue.queue_arn == dlq_arn

    template = synth(build)
    assert resources(template, "AWS::SNS::Topic") == {}
    assert only(template, "AWS::SNS::Subscription")["Properties"]["TopicArn"] == topic_arn
    # One alarm per resource: the messaging alarms on the given DLQ, the consumer does not again.
    assert (
        sorted(a["MetricName"] for a in alarms_of(template).values()).count(
            "ApproximateNumberOfMessagesVisible"
        )
        == 2
    )
    queue = resources(template, "AWS::SQS::Queue")[logical_id(template, "AWS::SQS::Queue", "MessagingQueue")]
    assert queue["Properties"]["RedrivePolicy"]["deadLetterTargetArn"] == dlq_arn
    sends = [s for s in policy_statements(template) if "sqs:SendMessage" in actions_of(s)]
    assert [s["Resource"] for s in sends] == [dlq_arn]
    assert env_of(template)["DLQ_URL"] == {
        "Fn::Join": ["", ["https://sqs.eu-west-1.", {"Ref": "AWS::URLSuffix"}, "/111122223333/failures.fifo"]]
    }


def test_standard_pipeline_end_to_end(synth):
    template = _standard(synth, "Pipeline", batch_size=500, max_batching_window=Duration.seconds(10))
    assert "FifoTopic" not in only(template, "AWS::SNS::Topic").get("Properties", {})
    assert all("FifoQueue" not in q["Properties"] for q in resources(template, "AWS::SQS::Queue").values())
    assert env_of(template)["QUEUE_TYPE"] == "standard"
    mapping = only(template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert (mapping["BatchSize"], mapping["MaximumBatchingWindowInSeconds"]) == (500, 10)


def test_pipeline_without_a_topic(synth):
    grants: list[iam.Grant] = []

    def build(stack: cdk.Stack) -> None:
        pipeline = IdempotentPipeline(stack, "Pipeline", messaging_options=MessagingOptions(with_topic=False))
        assert pipeline.topic is None and pipeline.subscription_dead_letter_queue is None
        grants.append(
            pipeline.grant_publish(iam.Role(stack, "Producer", assumed_by=iam.AccountRootPrincipal()))
        )

    template = synth(build)
    assert resources(template, "AWS::SNS::Topic") == {}
    assert grants[0].success
    assert len(alarms_of(template)) == 7


def test_a_building_block_error_reaches_the_composite():
    with pytest.raises(ConfigurationError, match=r"^ConsumerOptions.batch_size must be between 1 and 10"):
        IdempotentPipeline(new_stack(), "P", consumer_options=ConsumerOptions(batch_size=11))
    with pytest.raises(
        ConfigurationError, match=r"^MessagingOptions.max_receive_count must be between 1 and 1000"
    ):
        IdempotentPipeline(new_stack(), "P", messaging_options=MessagingOptions(max_receive_count=0))
    with pytest.raises(
        ConfigurationError,
        match=r"^TableOptions.partition_key_name, TableOptions.sort_key_name and "
        r"TableOptions.time_to_live_attribute must be three different attribute names",
    ):
        IdempotentPipeline(
            new_stack(), "P", table_options=TableOptions(partition_key_name="k", sort_key_name="k")
        )
    with pytest.raises(ConfigurationError, match=r"^dashboard must be True or False; got 'yes'$"):
        IdempotentPipeline(new_stack(), "P", dashboard="yes")  # type: ignore[arg-type]


def test_the_short_ttl_warning_reaches_the_composite():
    stack = new_stack()
    IdempotentPipeline(stack, "P", consumer_options=ConsumerOptions(document_ttl=Duration.hours(1)))
    ((path, message),) = warnings_of(stack)
    assert path == "/TestStack/P/Consumer" and "idempotent-pipeline:short-ttl" in message


# -- alarms --------------------------------------------------------------------------------------------


def test_ten_alarms_see_what_matters(template):
    """Not the Errors metric alone: a partial batch response is a successful invocation."""
    names = sorted(a["MetricName"] for a in alarms_of(template).values())
    assert names == sorted(
        [
            "ApproximateNumberOfMessagesVisible",  # the DLQ
            "ApproximateNumberOfMessagesVisible",  # the subscription's DLQ
            "NumberOfNotificationsFailed",
            "NumberOfNotificationsFailedToRedriveToDlq",  # lost: not even in the subscription's DLQ
            "ApproximateAgeOfOldestMessage",
            "failed",
            "quarantined",
            "conflicts",
            "misconfigured",
            "Errors",
        ]
    )
    assert all("AlarmActions" not in a for a in alarms_of(template).values())


def test_alarm_topic_receives_every_alarm(synth):
    def build(stack: cdk.Stack) -> None:
        oncall = sns.Topic(stack, "Oncall", enforce_ssl=True)
        IdempotentPipeline(stack, "Pipeline", alarm_options=AlarmOptions(alarm_topic=oncall))

    template = synth(build)
    oncall = {"Ref": logical_id(template, "AWS::SNS::Topic", "Oncall")}
    alarms = alarms_of(template)
    assert len(alarms) == 10
    assert all(a["AlarmActions"] == [oncall] == a["OKActions"] for a in alarms.values())


def test_an_encrypted_alarm_topic_of_the_app_gets_the_statement_cloudwatch_needs(synth):
    def build(stack: cdk.Stack) -> None:
        key = kms.Key(stack, "AlarmKey", enable_key_rotation=True)
        oncall = sns.Topic(stack, "Oncall", enforce_ssl=True, master_key=key)
        IdempotentPipeline(stack, "Pipeline", alarm_options=AlarmOptions(alarm_topic=oncall))

    template = synth(build)
    statements = only(template, "AWS::KMS::Key")["Properties"]["KeyPolicy"]["Statement"]
    cloudwatch = [s for s in statements if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}]
    assert cloudwatch == [
        {
            "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
            "Effect": "Allow",
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Resource": "*",
            "Sid": "AllowCloudWatchAlarmsToNotifyTheEncryptedTopic",
        }
    ]


def test_an_alarm_topic_with_an_imported_key_warns_once():
    stack = new_stack()
    key = kms.Key.from_key_arn(stack, "Key", "arn:aws:kms:eu-west-1:111122223333:key/abc")
    oncall = sns.Topic(stack, "Oncall", enforce_ssl=True, master_key=key)
    IdempotentPipeline(stack, "Pipeline", alarm_options=AlarmOptions(alarm_topic=oncall))
    (warning,) = warnings_of(stack)
    assert warning[1].startswith(
        "the alarm topic's key is an imported key (arn:aws:kms:eu-west-1:111122223333:key/abc)"
    )
    assert (
        '{"Service": "cloudwatch.amazonaws.com"} the actions kms:Decrypt and kms:GenerateDataKey*'
        in warning[1]
    )
    assert "alarms fire unseen" in warning[1]


# Older aws-cdk-lib releases (2.180 and before) cannot import a topic with its key.
TOPIC_KEY_IMPORT = pytest.mark.skipif(
    not hasattr(sns, "TopicAttributes") or "key_arn" not in inspect.signature(sns.TopicAttributes).parameters,
    reason="this aws-cdk-lib cannot import a topic with its key (key_arn is newer)",
)


@TOPIC_KEY_IMPORT
def test_an_imported_alarm_topic_imported_with_its_key_warns_too():
    stack = new_stack()
    oncall = sns.Topic.from_topic_attributes(
        stack,
        "Oncall",
        topic_arn="arn:aws:sns:eu-west-1:111122223333:oncall",
        key_arn="arn:aws:kms:eu-west-1:111122223333:key/abc",
    )
    IdempotentPipeline(stack, "Pipeline", alarm_options=AlarmOptions(alarm_topic=oncall))
    key_warning = [w for w in warnings_of(stack) if "imported-key:alarm-topic" in w[1]]
    (warning,) = key_warning
    assert "cloudwatch.amazonaws.com" in warning[1]
    assert warning[1].endswith("[ack: idempotent-pipeline:imported-key:alarm-topic]")


@TOPIC_KEY_IMPORT
def test_acknowledging_the_alarm_topic_key_keeps_the_queue_key_warning():
    """One id per key: the alarm topic's warning (alarms unseen) must not silence the queue key's (SNS drops
    every message)."""
    stack = new_stack()
    queue_key = kms.Key.from_key_arn(
        stack, "QueueKey", "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    )
    oncall = sns.Topic.from_topic_attributes(
        stack,
        "Oncall",
        topic_arn="arn:aws:sns:eu-west-1:111122223333:oncall",
        key_arn="arn:aws:kms:eu-west-1:111122223333:key/abc",
    )
    pipeline = IdempotentPipeline(
        stack,
        "Pipeline",
        messaging_options=MessagingOptions(encryption_key=queue_key),
        alarm_options=AlarmOptions(alarm_topic=oncall),
    )
    for acknowledged in ("imported-key:alarm-topic", "imported-alarm-topic"):
        cdk.Annotations.of(pipeline.messaging).acknowledge_warning(
            f"idempotent-pipeline:{acknowledged}", "the on-call topic and its key allow CloudWatch"
        )
    (warning,) = warnings_of(stack)
    assert warning[1].startswith("MessagingOptions.encryption_key is an imported key")
    assert warning[1].endswith("[ack: idempotent-pipeline:imported-key:queue]")


IMPORTED_ALARM_KEY = "arn:aws:kms:eu-west-1:111122223333:key/abc"
ALARM_TOPICS: dict[str, Any] = {
    "tls only": lambda stack: sns.Topic(stack, "Oncall", enforce_ssl=True),
    "without a policy of its own": lambda stack: sns.Topic(stack, "Oncall"),
    "encrypted with a key of the app": lambda stack: sns.Topic(
        stack, "Oncall", enforce_ssl=True, master_key=kms.Key(stack, "Key", enable_key_rotation=True)
    ),
    "encrypted with an imported key": lambda stack: sns.Topic(
        stack, "Oncall", enforce_ssl=True, master_key=kms.Key.from_key_arn(stack, "Key", IMPORTED_ALARM_KEY)
    ),
}


@pytest.mark.parametrize("variant", sorted(ALARM_TOPICS))
def test_cloudwatch_may_publish_to_an_alarm_topic_of_the_app(variant, synth):
    """A topic policy replaces SNS's default one: with only the TLS deny, every alarm action failed ("no
    resource-based policy allows the SNS:Publish action")."""
    template = synth(
        lambda stack: IdempotentPipeline(
            stack, "Pipeline", alarm_options=AlarmOptions(alarm_topic=ALARM_TOPICS[variant](stack))
        )
    )
    oncall = logical_id(template, "AWS::SNS::Topic", "Oncall")
    assert cloudwatch_may_publish(template.to_json(), oncall)


def test_an_alarm_topic_shared_by_two_pipelines_gets_cloudwatchs_statement_once(synth):
    def build(stack: cdk.Stack) -> None:
        oncall = sns.Topic(stack, "Oncall", enforce_ssl=True)
        for name in ("Orders", "Refunds"):
            IdempotentPipeline(stack, name, alarm_options=AlarmOptions(alarm_topic=oncall))

    template = synth(build)
    oncall = logical_id(template, "AWS::SNS::Topic", "Oncall")
    assert cloudwatch_may_publish(template.to_json(), oncall)
    (policy,) = [
        r
        for r in resources(template, "AWS::SNS::TopicPolicy").values()
        if r["Properties"]["Topics"] == [{"Ref": oncall}]
    ]
    sids = [s.get("Sid") for s in policy["Properties"]["PolicyDocument"]["Statement"]]
    assert sorted(sids) == ["AllowCloudWatchAlarmsToPublish", "AllowPublishThroughSSLOnly"]


def test_an_imported_alarm_topic_warns_naming_the_statement_cloudwatch_needs():
    stack = new_stack()
    oncall = sns.Topic.from_topic_arn(stack, "Oncall", "arn:aws:sns:eu-west-1:111122223333:oncall")
    pipeline = IdempotentPipeline(stack, "Pipeline", alarm_options=AlarmOptions(alarm_topic=oncall))
    (warning,) = warnings_of(stack)
    assert warning[1].startswith(
        "AlarmOptions.alarm_topic is an imported topic (arn:aws:sns:eu-west-1:111122223333:oncall): CDK "
        'cannot change its policy. The policy must allow {"Service": "cloudwatch.amazonaws.com"} the action '
        "sns:Publish on the topic"
    )
    assert '"aws:SourceAccount"' in warning[1] and "cloudwatch:<region>:<account>:alarm:*" in warning[1]
    assert warning[1].endswith(
        "every alarm action fails and alarms fire unseen [ack: idempotent-pipeline:imported-alarm-topic]"
    )
    cdk.Annotations.of(pipeline.messaging).acknowledge_warning(
        "idempotent-pipeline:imported-alarm-topic", "the on-call topic's policy allows CloudWatch"
    )
    assert warnings_of(stack) == []


def test_the_readme_alarm_topic_example_passes_cdk_nag(tmp_path):
    """README: `alarm_topic=sns.Topic(stack, "Oncall", enforce_ssl=True)`; SNS3 fails without enforce_ssl."""

    def build(stack: cdk.Stack) -> None:
        IdempotentPipeline(
            stack,
            "Orders",
            alarm_options=AlarmOptions(alarm_topic=sns.Topic(stack, "Oncall", enforce_ssl=True)),
        )

    synth_with_nag(tmp_path, build)
    assert nag_findings(tmp_path) == []


def test_a_traced_pipeline_in_a_vpc_passes_cdk_nag(tmp_path):
    """The consumer acknowledges IAM5 for X-Ray and the network-interface actions (no resource-level
    permissions): through Validations, or on older aws-cdk-lib as the metadata cdk-nag 2 reads."""

    def build(stack: cdk.Stack) -> None:
        flow_logs = logs.LogGroup(stack, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH)
        vpc = ec2.Vpc(
            stack,
            "Vpc",
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="Private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
            ],
            flow_logs={
                "Logs": ec2.FlowLogOptions(destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs))
            },
        )
        IdempotentPipeline(
            stack,
            "Orders",
            consumer_options=ConsumerOptions(tracing=lambda_.Tracing.ACTIVE, vpc=vpc),
        )

    synth_with_nag(tmp_path, build)
    assert nag_findings(tmp_path) == []


# -- metrics and dashboard --------------------------------------------------------------------------------


def test_the_consumers_metrics_are_on_the_composite(built):
    pipeline, _ = built
    stack = cdk.Stack.of(pipeline)
    for name in ("processed", "duplicates", "conflicts", "failed", "quarantined", "misconfigured"):
        mine = getattr(pipeline, f"metric_{name}")()
        theirs = getattr(pipeline.consumer, f"metric_{name}")()
        assert (mine.metric_name, stack.resolve(mine.dimensions)) == (
            theirs.metric_name,
            stack.resolve(theirs.dimensions),
        )
    assert pipeline.metric_duplicate_rate().expression == pipeline.consumer.metric_duplicate_rate().expression


@pytest.fixture(scope="session")
def dashboard_template(synth) -> assertions.Template:
    return synth(lambda s: IdempotentPipeline(s, "Pipeline", dashboard=True))


def test_dashboard_shows_what_an_operator_looks_at_first(dashboard_template):
    body = only(dashboard_template, "AWS::CloudWatch::Dashboard")["Properties"]["DashboardBody"]
    text = json.dumps(body)
    titles = [
        "Records by outcome (per minute)",
        "Duplicate rate (%)",
        "Conflicts and misconfiguration",
        "Dead-letter queues (visible messages)",
        "Oldest message in the queue (seconds)",
        "DynamoDB write throttles",
        "Function duration (ms)",
        "Function concurrency and throttles",
        "Invocation errors",
    ]
    for title in titles:
        assert title in text, title
    for metric in (
        "processed",
        "duplicates",
        "quarantined",
        "failed",
        "conflicts",
        "misconfigured",
        "100 * duplicates / (processed + duplicates)",
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        "WriteThrottleEvents",
        "Duration",
        "ConcurrentExecutions",
        "Throttles",
    ):
        assert metric in text, metric
    subscription_dlq = logical_id(dashboard_template, "AWS::SQS::Queue", "SubscriptionDeadLetterQueue")
    assert subscription_dlq in text


def test_no_dashboard_by_default(template):
    assert resources(template, "AWS::CloudWatch::Dashboard") == {}


def test_dashboard_attribute(synth):
    dashboards: list[Any] = []
    synth(lambda s: dashboards.append(IdempotentPipeline(s, "Pipeline", dashboard=True).dashboard))
    assert dashboards[0] is not None and dashboards[0].node.path.endswith("Pipeline/Dashboard/Dashboard")
