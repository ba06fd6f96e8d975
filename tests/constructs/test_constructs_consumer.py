"""IdempotentConsumer: function, environment (the runtime contract), role, event source, warnings, alarms,
metrics, VPC, tracing and layers."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Duration, assertions
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs_helpers import (
    actions_of,
    alarms_of,
    build_consumer,
    env_of,
    fifo_queue,
    logical_id,
    new_stack,
    only,
    policy_statements,
    resources,
    resources_of,
    template_of,
    warnings_of,
)
from idempotent_runtime import contract
from idempotent_runtime.contract import Mode

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
from idempotent_pipeline.consumer import NETWORK_INTERFACE_ACTIONS


def consumer_template(**options: Any) -> assertions.Template:
    stack = new_stack()
    build_consumer(stack, **options)
    return template_of(stack)


def key_actions(template: assertions.Template, key: str) -> list[list[str]]:
    """The actions of each statement on the KMS key whose logical id holds ``key``."""
    key_id = logical_id(template, "AWS::KMS::Key", key)
    on_key = [s for s in policy_statements(template) if s["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}]
    return [sorted(actions_of(s)) for s in on_key]


def function_props(template: assertions.Template) -> dict[str, Any]:
    return only(template, "AWS::Lambda::Function")["Properties"]


def table_actions(template: assertions.Template) -> set[str]:
    return {
        a
        for statement in policy_statements(template)
        for a in actions_of(statement)
        if a.startswith("dynamodb:")
    }


@pytest.fixture(scope="session")
def default_stack() -> cdk.Stack:
    stack = new_stack()
    build_consumer(stack)
    return stack


@pytest.fixture(scope="session")
def default_template(default_stack) -> assertions.Template:
    return template_of(default_stack)


@pytest.fixture(scope="session")
def from_messaging() -> tuple[IdempotentConsumer, assertions.Template]:
    """A consumer given a Messaging's queue: it reads the queue's settings from Python, not through jsii."""
    stack = new_stack()
    messaging = Messaging(stack, "Messaging", options=MessagingOptions(max_receive_count=7))
    consumer = IdempotentConsumer(
        stack, "Consumer", queue=messaging.queue, table=IdempotencyTable(stack, "Table")
    )
    return consumer, template_of(stack)


# -- function -------------------------------------------------------------------------------------------


def test_function_runs_the_bundled_handler_on_the_pinned_python_runtime(default_template):
    props = function_props(default_template)
    assert props["Runtime"] == "python3.14"
    assert props["Handler"] == contract.HANDLER == "idempotent_runtime.handler.handler"
    assert (props["Timeout"], props["MemorySize"], props["Architectures"]) == (30, 256, ["arm64"])
    for absent in ("ReservedConcurrentExecutions", "VpcConfig", "TracingConfig", "Layers"):
        assert absent not in props


def test_an_aws_cdk_lib_that_knows_a_newer_python_does_not_change_the_runtime(monkeypatch):
    """Upgrading aws-cdk-lib used to move the function (and the wheels installed for it) to its newest
    Python silently."""
    # An existing runtime under a newer constant's name: a new Runtime would join aws-cdk-lib's Runtime.ALL
    # for the rest of the session (and cdk-nag's L1 would then call it the newest).
    monkeypatch.setattr(lambda_.Runtime, "PYTHON_3_99", lambda_.Runtime.PYTHON_3_12, raising=False)
    assert function_props(consumer_template())["Runtime"] == "python3.14"


def test_the_runtime_is_settable():
    template = consumer_template(runtime=lambda_.Runtime.PYTHON_3_12)
    assert function_props(template)["Runtime"] == "python3.12"


@pytest.mark.parametrize(
    ("runtime", "message"),
    [
        (
            lambda_.Runtime.NODEJS_20_X,
            "ConsumerOptions.runtime must be a Python runtime from python3.12 on (Amazon Linux 2023, for "
            "which the asset's wheels are installed), e.g. Runtime.PYTHON_3_14; got nodejs20.x",
        ),
        (
            lambda_.Runtime.PYTHON_3_11,
            "ConsumerOptions.runtime must be a Python runtime from python3.12 on (Amazon Linux 2023, for "
            "which the asset's wheels are installed), e.g. Runtime.PYTHON_3_14; got python3.11",
        ),
        (
            "python3.14",
            "ConsumerOptions.runtime must be a lambda_.Runtime (e.g. Runtime.PYTHON_3_14); got 'python3.14'",
        ),
    ],
    ids=["node", "python-3.11", "a-string"],
)
def test_a_runtime_that_cannot_run_the_asset_is_refused(runtime, message):
    with pytest.raises(ConfigurationError) as raised:
        consumer_template(runtime=runtime)
    assert str(raised.value) == message


def test_function_logs_to_its_own_log_group_with_retention(default_template):
    log_group_id = next(iter(resources(default_template, "AWS::Logs::LogGroup")))
    assert function_props(default_template)["LoggingConfig"] == {"LogGroup": {"Ref": log_group_id}}
    assert only(default_template, "AWS::Logs::LogGroup")["Properties"]["RetentionInDays"] == 30
    writes = [s for s in policy_statements(default_template) if "logs:PutLogEvents" in actions_of(s)]
    assert writes == [
        {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [log_group_id, "Arn"]},
        }
    ]


def test_function_role_has_no_managed_policies_and_is_assumed_by_lambda(default_template):
    role = only(default_template, "AWS::IAM::Role")["Properties"]
    assert "ManagedPolicyArns" not in role
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
    ]


def test_event_source_reports_batch_item_failures_with_batches_of_ten(default_template):
    mapping = only(default_template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == 10
    assert "MaximumBatchingWindowInSeconds" not in mapping and "ScalingConfig" not in mapping


def test_batch_size_concurrency_memory_and_log_retention_are_configurable():
    template = consumer_template(
        batch_size=3,
        max_concurrency=5,
        reserved_concurrent_executions=20,
        memory_size=1024,
        log_retention=logs.RetentionDays.ONE_WEEK,
        timeout=Duration.seconds(20),
        architecture=lambda_.Architecture.X86_64,
    )
    mapping = only(template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert (mapping["BatchSize"], mapping["ScalingConfig"]) == (3, {"MaximumConcurrency": 5})
    props = function_props(template)
    assert (props["ReservedConcurrentExecutions"], props["MemorySize"], props["Timeout"]) == (20, 1024, 20)
    assert props["Architectures"] == ["x86_64"]
    assert only(template, "AWS::Logs::LogGroup")["Properties"]["RetentionInDays"] == 7


# -- environment: the runtime contract ------------------------------------------------------------------


def test_default_environment_follows_the_runtime_contract(default_template):
    table_id = next(iter(resources(default_template, "AWS::DynamoDB::Table")))
    assert env_of(default_template) == {
        "TABLE_NAME": {"Ref": table_id},
        "PARTITION_KEY": "pk",
        "SORT_KEY": "sk",
        "TTL_ATTRIBUTE": "expires_at",
        "DEDUP_TTL_SECONDS": "604800",
        "DOCUMENT_TTL_SECONDS": "0",  # documents never expire unless asked
        "IDEMPOTENCY_MODE": "document",
        "KEY_SOURCE": "fields",
        "PARTITION_KEY_FIELD": "x",
        "SORT_KEY_FIELD": "y",
        "QUEUE_TYPE": "fifo",
        "ON_CONFLICT": "quarantine",
        "METRICS_NAMESPACE": "IdempotentPipeline",
    }


def test_every_variable_written_is_a_contract_variable(from_messaging):
    _, template = from_messaging
    assert set(env_of(template)) <= contract.VARIABLE_NAMES
    assert "TTL_SECONDS" not in env_of(template)


def test_every_option_maps_to_its_contract_variable(user_code):
    stack = new_stack()
    dlq = fifo_queue(stack, "Dlq")
    table = IdempotencyTable(
        stack,
        "Table",
        options=TableOptions(
            partition_key_name="order_id", sort_key_name="line_id", time_to_live_attribute="ttl"
        ),
    )
    build_consumer(
        stack,
        table=table,
        dead_letter_queue=dlq,
        mode="guarded",
        processor="orders:handle",
        code_directory=str(user_code),
        dedup_ttl=Duration.hours(2),
        lease_duration=Duration.seconds(45),
        lease_margin=Duration.seconds(3),
        max_workers=4,
        metrics_namespace="Orders",
        log_level="debug",
        key_source="fields",
        partition_key_field="order.id",
        sort_key_field="line",
        key_prefix="tenant-a#",
        fingerprint_exclude=["sent_at", "trace.id"],
        on_conflict="duplicate",
        environment={"ORDERS_API": "https://example.invalid"},
    )
    template = template_of(stack)
    dlq_id = logical_id(template, "AWS::SQS::Queue", "Dlq")
    env = env_of(template)
    assert {k: v for k, v in env.items() if k != "TABLE_NAME"} == {
        "PARTITION_KEY": "order_id",
        "SORT_KEY": "line_id",
        "TTL_ATTRIBUTE": "ttl",
        "DEDUP_TTL_SECONDS": "7200",
        "IDEMPOTENCY_MODE": "guarded",
        "KEY_SOURCE": "fields",
        "PARTITION_KEY_FIELD": "order.id",
        "SORT_KEY_FIELD": "line",
        "KEY_PREFIX": "tenant-a#",
        "FINGERPRINT_EXCLUDE": '["sent_at","trace.id"]',
        "ON_CONFLICT": "duplicate",
        "QUEUE_TYPE": "fifo",
        "PROCESSOR": "orders:handle",
        "DLQ_URL": {"Ref": dlq_id},
        "LEASE_SECONDS": "45",
        "LEASE_MARGIN_SECONDS": "3",
        "MAX_WORKERS": "4",
        "METRICS_NAMESPACE": "Orders",
        "LOG_LEVEL": "DEBUG",
        "ORDERS_API": "https://example.invalid",
    }
    assert json.loads(env["FINGERPRINT_EXCLUDE"]) == ["sent_at", "trace.id"]


def test_fingerprint_fields_are_a_json_array():
    env = env_of(consumer_template(fingerprint_fields=["order.id", "amount"]))
    assert (
        json.loads(env["FINGERPRINT_FIELDS"]) == ["order.id", "amount"] and "FINGERPRINT_EXCLUDE" not in env
    )


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, {"DEDUP_TTL_SECONDS": "604800", "DOCUMENT_TTL_SECONDS": "0"}),
        (
            {"document_ttl": Duration.days(30)},
            {"DEDUP_TTL_SECONDS": "604800", "DOCUMENT_TTL_SECONDS": "2592000"},
        ),
        ({"dedup_ttl": None}, {"DEDUP_TTL_SECONDS": "0", "DOCUMENT_TTL_SECONDS": "0"}),
    ],
)
def test_document_mode_lifetimes(options, expected):
    """Documents are kept unless a lifetime is asked for; "never" is expressible for both lifetimes."""
    env = env_of(consumer_template(**options))
    assert {k: env[k] for k in expected} == expected


def test_transaction_mode_has_no_document_lifetime(user_code):
    env = env_of(
        consumer_template(
            mode="transaction", processor="orders:handle", code_directory=str(user_code), dedup_ttl=None
        )
    )
    assert env["DEDUP_TTL_SECONDS"] == "0" and "DOCUMENT_TTL_SECONDS" not in env
    assert "LEASE_MARGIN_SECONDS" not in env


def test_guarded_mode_always_states_its_lease_margin(user_code):
    env = env_of(consumer_template(mode="guarded", processor="orders:handle", code_directory=str(user_code)))
    assert env["LEASE_MARGIN_SECONDS"] == str(contract.LEASE_MARGIN_SECONDS.default)


@pytest.mark.parametrize("key_source", ["dedup_id", "message_id", "body_sha256"])
def test_non_field_key_sources_set_no_field_variables(key_source):
    env = env_of(consumer_template(key_source=key_source))
    assert env["KEY_SOURCE"] == key_source
    assert "PARTITION_KEY_FIELD" not in env and "SORT_KEY_FIELD" not in env


def test_queue_facts_come_from_the_messaging(from_messaging):
    """The queue's type, its redrive DLQ and max receives reach the function without reading them back."""
    consumer, template = from_messaging
    env = env_of(template)
    dlq_id = logical_id(template, "AWS::SQS::Queue", "MessagingDeadLetterQueue")
    assert (env["QUEUE_TYPE"], env["MAX_RECEIVE_COUNT"], env["DLQ_URL"]) == ("fifo", "7", {"Ref": dlq_id})
    assert consumer.dead_letter_queue is not None


def test_a_queue_of_the_app_with_a_redrive_policy_gives_max_receive_count_and_its_dlq():
    stack = new_stack()
    dlq = sqs.Queue(stack, "Dlq", fifo=True)
    queue = fifo_queue(stack, dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=4))
    env = env_of(template_of_consumer(stack, queue=queue))
    assert env["MAX_RECEIVE_COUNT"] == "4" and "DLQ_URL" in env


def template_of_consumer(stack: cdk.Stack, **kwargs: Any) -> assertions.Template:
    build_consumer(stack, **kwargs)
    return template_of(stack)


def test_an_imported_queue_gives_no_max_receive_count():
    stack = new_stack()
    queue = sqs.Queue.from_queue_arn(stack, "Imported", "arn:aws:sqs:eu-west-1:111122223333:orders.fifo")
    dlq = sqs.Queue.from_queue_arn(stack, "ImportedDlq", "arn:aws:sqs:eu-west-1:111122223333:failures.fifo")
    env = env_of(template_of_consumer(stack, queue=queue, dead_letter_queue=dlq))
    assert env["QUEUE_TYPE"] == "fifo" and "MAX_RECEIVE_COUNT" not in env and "DLQ_URL" in env


def test_retired_and_runtime_variables_are_refused_in_environment():
    with pytest.raises(ConfigurationError) as raised:
        build_consumer(new_stack(), environment={"TTL_SECONDS": "60", "LOG_LEVEL": "DEBUG", "MINE": "1"})
    assert str(raised.value) == (
        "ConsumerOptions.environment may not set the runtime's own variables (use the matching options); "
        "got LOG_LEVEL, TTL_SECONDS"
    )


def test_the_environment_parses_in_the_runtime(user_code):
    """With the runtime of the contract: the variables the construct writes make a Config."""
    config_module = pytest.importorskip("idempotent_runtime.config")
    if "dedup_ttl_seconds" not in getattr(config_module.Config, "__dataclass_fields__", {}):
        pytest.skip("this runtime predates the contract's variables")
    stack = new_stack()
    messaging = Messaging(stack, "Messaging", options=MessagingOptions(fifo=False))
    IdempotentConsumer(
        stack,
        "Consumer",
        queue=messaging.queue,
        table=IdempotencyTable(stack, "Table"),
        options=ConsumerOptions(
            mode="guarded",
            processor="orders:handle",
            code_directory=str(user_code),
            dedup_ttl=None,
            fingerprint_fields=["order.id"],
            key_prefix="a#",
        ),
    )
    deployed = {
        name: "https://sqs.eu-west-1.amazonaws.com/111122223333/dlq" if name == "DLQ_URL" else "orders"
        for name, value in env_of(template_of(stack)).items()
        if isinstance(value, dict)
    }
    deployed.update({k: v for k, v in env_of(template_of(stack)).items() if isinstance(v, str)})
    config = config_module.Config.from_env(deployed)
    assert (config.mode, config.queue_type, config.dedup_ttl_seconds) == ("guarded", "standard", 0)
    assert (config.fingerprint_fields, config.key_prefix, config.max_receive_count) == (
        ("order.id",),
        "a#",
        5,
    )


# -- permissions: exactly the runtime's actions per mode ------------------------------------------------


@pytest.mark.parametrize("mode", list(Mode))
def test_table_permissions_are_exactly_the_contracts_actions_of_the_mode(mode, user_code):
    processor = {
        Mode.DOCUMENT: {},
        Mode.VERSIONED: {"version_field": "v"},
    }.get(mode, {"processor": "orders:handle", "code_directory": str(user_code)})
    template = consumer_template(mode=mode, **processor)
    assert table_actions(template) == set(contract.TABLE_ACTIONS[mode])


def test_table_permissions_name_only_the_table(default_template):
    table_id = next(iter(resources(default_template, "AWS::DynamoDB::Table")))
    statements = [s for s in policy_statements(default_template) if "dynamodb:PutItem" in actions_of(s)]
    assert [resources_of(s) for s in statements] == [[{"Fn::GetAtt": [table_id, "Arn"]}]]


def test_queue_permissions_are_the_event_source_consume_actions(default_template):
    queue_id = next(iter(resources(default_template, "AWS::SQS::Queue")))
    sqs_statements = [s for s in policy_statements(default_template) if actions_of(s)[0].startswith("sqs:")]
    assert [(sorted(actions_of(s)), s["Resource"]) for s in sqs_statements] == [
        (
            [
                "sqs:ChangeMessageVisibility",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
                "sqs:GetQueueUrl",
                "sqs:ReceiveMessage",
            ],
            {"Fn::GetAtt": [queue_id, "Arn"]},
        )
    ]


def test_no_dlq_means_no_dlq_url_and_no_send_message(default_template):
    assert "DLQ_URL" not in env_of(default_template)
    assert not [s for s in policy_statements(default_template) if "sqs:SendMessage" in actions_of(s)]


def test_dlq_gets_send_message_only():
    stack = new_stack()
    dlq = fifo_queue(stack, "Dlq")
    template = template_of_consumer(stack, dead_letter_queue=dlq)
    dlq_id = logical_id(template, "AWS::SQS::Queue", "Dlq")
    sends = [s for s in policy_statements(template) if "sqs:SendMessage" in actions_of(s)]
    assert sends == [
        {"Action": "sqs:SendMessage", "Effect": "Allow", "Resource": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    ]


def test_dlq_with_customer_managed_key_adds_generate_data_key_and_decrypt():
    stack = new_stack()
    dlq_key = kms.Key(stack, "DlqKey")
    dlq = fifo_queue(stack, "Dlq", encryption=sqs.QueueEncryption.KMS, encryption_master_key=dlq_key)
    template = template_of_consumer(stack, dead_letter_queue=dlq)
    assert key_actions(template, "DlqKey") == [sorted(contract.DLQ_KEY_ACTIONS)]


def test_table_with_customer_managed_key_grants_the_key_actions_dynamodb_needs():
    stack = new_stack()
    key = kms.Key(stack, "TableKey")
    template = template_of_consumer(
        stack, table=IdempotencyTable(stack, "Table", options=TableOptions(encryption_key=key))
    )
    assert key_actions(template, "TableKey") == [sorted(contract.TABLE_KEY_ACTIONS)]


def test_imported_table_with_its_key_is_granted_by_arn():
    stack = new_stack()
    key = kms.Key.from_key_arn(stack, "Key", "arn:aws:kms:eu-west-1:111122223333:key/abc")
    existing = dynamodb.Table.from_table_attributes(
        stack, "Existing", table_name="orders", encryption_key=key
    )
    table = IdempotencyTable.from_table(
        stack, "Orders", existing, partition_key_name="tenant", sort_key_name="id"
    )
    template = template_of_consumer(stack, table=table)
    env = env_of(template)
    assert (env["TABLE_NAME"], env["PARTITION_KEY"], env["SORT_KEY"]) == ("orders", "tenant", "id")
    assert table_actions(template) == {"dynamodb:PutItem"}
    assert [
        sorted(actions_of(s)) for s in policy_statements(template) if actions_of(s)[0].startswith("kms:")
    ] == [sorted(contract.TABLE_KEY_ACTIONS)]


def through(service: str) -> dict[str, Any]:
    """The kms:ViaService value of ``service`` in the stack's region."""
    return {"Fn::Join": ["", [f"{service}.", {"Ref": "AWS::Region"}, ".", {"Ref": "AWS::URLSuffix"}]]}


def key_statements(template: assertions.Template) -> list[dict[str, Any]]:
    return [s for s in policy_statements(template) if any(a.startswith("kms:") for a in actions_of(s))]


def test_the_consumer_uses_keys_only_through_sqs_and_dynamodb():
    """One key for the queues and the table (the reference app's): the function's role may use it only as
    SQS and DynamoDB do on its behalf, never decrypt with it directly. CDK's SqsEventSource granted
    kms:Decrypt on the queue key without a condition."""
    stack = new_stack()
    key = kms.Key(stack, "DataKey")
    IdempotentPipeline(
        stack,
        "Pipeline",
        messaging_options=MessagingOptions(encryption_key=key),
        table_options=TableOptions(encryption_key=key),
    )
    template = template_of(stack)
    key_arn = {"Fn::GetAtt": [logical_id(template, "AWS::KMS::Key", "DataKey"), "Arn"]}
    granted = {
        json.dumps(s["Condition"], sort_keys=True): (sorted(actions_of(s)), s["Resource"])
        for s in key_statements(template)
    }
    assert granted == {
        json.dumps({"StringEquals": {"kms:ViaService": through("dynamodb")}}, sort_keys=True): (
            sorted(contract.TABLE_KEY_ACTIONS),
            key_arn,
        ),
        # receiving from the queue (kms:Decrypt) and sending to the DLQ (kms:GenerateDataKey, kms:Decrypt)
        json.dumps({"StringEquals": {"kms:ViaService": through("sqs")}}, sort_keys=True): (
            sorted(contract.DLQ_KEY_ACTIONS),
            key_arn,
        ),
    }
    assert len(key_statements(template)) == 2


def test_an_imported_queue_key_is_used_only_through_sqs():
    stack = new_stack()
    queue = sqs.Queue.from_queue_attributes(
        stack,
        "Imported",
        queue_arn="arn:aws:sqs:eu-west-1:111122223333:orders.fifo",
        key_arn="arn:aws:kms:eu-west-1:111122223333:key/abc",
    )
    template = template_of_consumer(stack, queue=queue)
    assert key_statements(template) == [
        {
            "Action": "kms:Decrypt",
            "Condition": {"StringEquals": {"kms:ViaService": through("sqs")}},
            "Effect": "Allow",
            "Resource": "arn:aws:kms:eu-west-1:111122223333:key/abc",
        }
    ]


def test_the_event_source_mapping_keeps_its_logical_id():
    """The consumer makes the mapping itself now (to condition the key grant); a new logical id would
    replace the mapping, and Lambda refuses a second mapping of the same queue and function."""
    stack = new_stack()
    IdempotentPipeline(stack, "Pipeline")
    assert list(resources(template_of(stack), "AWS::Lambda::EventSourceMapping")) == [
        "PipelineConsumerFunctionSqsEventSourceTestStackPipelineMessagingQueue90D586FD81473C13"
    ]


# -- standard queues ----------------------------------------------------------------------------------------


def standard_queue(stack: cdk.Stack, visibility: Duration | None = None) -> sqs.Queue:
    return sqs.Queue(stack, "Standard", visibility_timeout=visibility or Duration.minutes(3))


def test_a_standard_queue_is_consumed_as_unordered():
    stack = new_stack()
    template = template_of_consumer(stack, queue=standard_queue(stack))
    assert env_of(template)["QUEUE_TYPE"] == "standard"


def test_standard_queues_take_batches_up_to_ten_thousand_with_a_window():
    stack = new_stack()
    template = template_of_consumer(
        stack,
        queue=standard_queue(stack, Duration.seconds(200)),  # 6 x 30 s + the 20 s window
        batch_size=10_000,
        max_batching_window=Duration.seconds(20),
    )
    mapping = only(template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert (mapping["BatchSize"], mapping["MaximumBatchingWindowInSeconds"]) == (10_000, 20)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"key_source": "dedup_id"},
            "ConsumerOptions.key_source 'dedup_id' needs a FIFO queue (a standard queue's messages carry no "
            "MessageDeduplicationId); got queue TestStack/Standard, of type 'standard'",
        ),
        (
            {"batch_size": 10_001, "max_batching_window": Duration.seconds(1)},
            "ConsumerOptions.batch_size must be between 1 and 10000 (standard queue); got 10001",
        ),
        (
            {"batch_size": 11},
            "ConsumerOptions.batch_size above 10 needs max_batching_window of at least 1 second (an SQS "
            "event "
            "source rule); got batch_size 11 without one",
        ),
        (
            {"max_batching_window": Duration.minutes(6)},
            "ConsumerOptions.max_batching_window must be at most 300 seconds; got 360 seconds",
        ),
    ],
)
def test_standard_queue_rules(options, message):
    stack = new_stack()
    with pytest.raises(ConfigurationError) as raised:
        build_consumer(stack, queue=standard_queue(stack), **options)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"batch_size": 11}, "ConsumerOptions.batch_size must be between 1 and 10 (FIFO queue); got 11"),
        ({"batch_size": 0}, "ConsumerOptions.batch_size must be between 1 and 10 (FIFO queue); got 0"),
        (
            {"max_batching_window": Duration.seconds(5)},
            "ConsumerOptions.max_batching_window applies only to standard queues (SQS does not batch FIFO "
            "queues over time); got 5 seconds with a FIFO queue",
        ),
    ],
)
def test_fifo_queue_rules(options, message):
    with pytest.raises(ConfigurationError) as raised:
        build_consumer(new_stack(), **options)
    assert str(raised.value) == message


def test_an_imported_queue_of_unknown_type_warns_and_is_treated_as_fifo():
    stack = new_stack()
    arn = cdk.CfnParameter(stack, "QueueArn").value_as_string
    queue = sqs.Queue.from_queue_arn(stack, "Imported", arn)
    template = template_of_consumer(stack, queue=queue)
    assert env_of(template)["QUEUE_TYPE"] == "fifo"
    ((path, message),) = warnings_of(stack)
    assert path == "/TestStack/Consumer" and "its type is unknown: treated as FIFO" in message
    assert message.endswith("[ack: idempotent-pipeline:queue-type-unknown]")


# -- checked at synth -------------------------------------------------------------------------------------


def _rejects(message: str, stack: cdk.Stack | None = None, **options: Any) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build_consumer(stack or new_stack(), **options)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"partition_key_field": "order..id"},
            "ConsumerOptions.partition_key_field: field path 'order..id' has an empty segment",
        ),
        (
            {"sort_key_field": ""},
            "ConsumerOptions.sort_key_field: a field path must be a non-empty string; got ''",
        ),
        (
            {"key_source": "dedup_id", "partition_key_field": "a"},
            "ConsumerOptions.partition_key_field applies only to key_source 'fields' or 'field'; got "
            "key_source 'dedup_id'",
        ),
        (
            {"mode": "guarded"},
            "ConsumerOptions.processor is required with ConsumerOptions.mode 'guarded'",
        ),
        (
            {"mode": "transaction"},
            "ConsumerOptions.processor is required with ConsumerOptions.mode 'transaction'",
        ),
        (
            {"key_prefix": "idempotency#a"},
            "ConsumerOptions.key_prefix must not begin with 'idempotency#' (the runtime's own keys); got "
            "'idempotency#a'",
        ),
        (
            {"key_prefix": "p" * 1025},
            "ConsumerOptions.key_prefix must be at most 1024 bytes of UTF-8; got '" + "p" * 98,
        ),
        (
            {"fingerprint_fields": ["a"], "fingerprint_exclude": ["b"]},
            "ConsumerOptions.fingerprint_fields and ConsumerOptions.fingerprint_exclude cannot both be set; "
            "got ('a',) and ('b',)",
        ),
        (
            {"fingerprint_fields": []},
            "ConsumerOptions.fingerprint_fields must name at least one field (unset: the whole body); got []",
        ),
        (
            {"fingerprint_exclude": ["ok", "bad."]},
            "ConsumerOptions.fingerprint_exclude: field path 'bad.' has an empty segment",
        ),
        (
            {"lease_duration": Duration.seconds(30)},
            "ConsumerOptions.lease_duration applies only to mode 'guarded'; got mode 'document'",
        ),
        (
            {"lease_margin": Duration.seconds(5)},
            "ConsumerOptions.lease_margin applies only to mode 'guarded'; got mode 'document'",
        ),
        (
            {"timeout": Duration.seconds(901)},
            "ConsumerOptions.timeout must be between 1 and 900 seconds; got 901 seconds",
        ),
        ({"memory_size": 64}, "ConsumerOptions.memory_size must be between 128 and 10240; got 64"),
        ({"max_concurrency": 1}, "ConsumerOptions.max_concurrency must be between 2 and 1000; got 1"),
        (
            {"reserved_concurrent_executions": 0},
            "ConsumerOptions.reserved_concurrent_executions must be at least 1; got 0",
        ),
        ({"max_workers": 65}, "ConsumerOptions.max_workers must be between 1 and 64; got 65"),
        (
            {"metrics_namespace": "a:b"},
            "ConsumerOptions.metrics_namespace must be 1 to 255 characters: letters, digits, spaces and "
            "'.-_/#' (no ':'), not beginning with a space or with 'AWS/' (the namespaces of AWS services); "
            "got "
            "'a:b'",
        ),
        (
            {"partition_key_field": "order", "sort_key_field": "order.id"},
            "ConsumerOptions.partition_key_field 'order' and ConsumerOptions.sort_key_field 'order.id': one "
            "field lies inside the other, so no body holds both (a key or a version is a string, number or "
            "boolean, not an object) and every message would be refused; name two separate fields",
        ),
        (
            {
                "mode": "versioned",
                "version_field": "order",
                "partition_key_field": "order.id",
                "sort_key_field": "y",
            },
            "ConsumerOptions.version_field 'order' and ConsumerOptions.partition_key_field 'order.id': one "
            "field lies inside the other, so no body holds both (a key or a version is a string, number or "
            "boolean, not an object) and every message would be refused; name two separate fields",
        ),
        (
            {"fingerprint_fields": ["f" * 200] * 25},
            None,  # built below: the size depends on the rest of the environment
        ),
    ],
)
def test_invalid_options_are_rejected_naming_option_and_value(options, message):
    if message is None:
        with pytest.raises(
            ConfigurationError, match=r"^the function's environment variables hold \d+ bytes, over"
        ):
            build_consumer(new_stack(), **options)
        return
    _rejects(message, **options)


def test_document_ttl_outside_document_mode_is_rejected(user_code):
    _rejects(
        "ConsumerOptions.document_ttl applies only to mode 'document'; got mode 'transaction'",
        mode="transaction",
        processor="orders:handle",
        code_directory=str(user_code),
        document_ttl=Duration.days(1),
    )


def test_visibility_timeout_below_six_times_the_function_timeout_is_rejected():
    stack = new_stack()
    _rejects(
        "visibility_timeout of queue TestStack/Queue must be at least 6 x the function timeout (30 "
        "seconds) = "
        "180 seconds; got 179 seconds",
        stack,
        queue=fifo_queue(stack, visibility_timeout=Duration.seconds(179)),
    )


def test_visibility_timeout_must_cover_the_batching_window_too():
    """The event source holds received (invisible) records for up to the window before it invokes."""
    stack = new_stack()
    _rejects(
        "visibility_timeout of queue TestStack/Standard must be at least 6 x the function timeout (30 "
        "seconds) + the batching window (300 seconds) = 480 seconds; got 180 seconds",
        stack,
        queue=standard_queue(stack),
        batch_size=1000,
        max_batching_window=Duration.minutes(5),
    )
    stack = new_stack()
    build_consumer(
        stack,
        queue=standard_queue(stack, Duration.seconds(480)),
        batch_size=1000,
        max_batching_window=Duration.minutes(5),
    )


def test_queue_with_sqs_default_visibility_timeout_is_rejected():
    stack = new_stack()
    with pytest.raises(ConfigurationError, match=r"= 60 seconds; got 30 seconds$"):
        build_consumer(stack, queue=sqs.Queue(stack, "Queue", fifo=True), timeout=Duration.seconds(10))


def test_a_messaging_queue_with_a_short_visibility_timeout_is_rejected():
    stack = new_stack()
    messaging = Messaging(stack, "M", options=MessagingOptions(visibility_timeout=Duration.minutes(1)))
    with pytest.raises(
        ConfigurationError, match=r"^visibility_timeout of queue TestStack/M/Queue must be at least"
    ):
        build_consumer(stack, queue=messaging.queue)


def test_vpc_options_need_a_vpc():
    stack = new_stack()
    _rejects(
        "ConsumerOptions.vpc_subnets needs vpc; got subnets without a VPC",
        stack,
        vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
    )


def test_dead_letter_queue_of_another_type_than_the_queue_is_rejected():
    stack = new_stack()
    dlq = sqs.Queue.from_queue_arn(stack, "Dlq", "arn:aws:sqs:eu-west-1:111122223333:failures")
    _rejects(
        "dead_letter_queue must be a FIFO queue like the queue it serves; got a standard queue: failures",
        stack,
        dead_letter_queue=dlq,
    )


# -- settings that cannot work together: contract.SETTINGS_RULES, as at cold start --------------------------

INIT_TABLE = {"partition_key_name": "order_id", "sort_key_name": "line_id"}
INIT_KEYS = {"partition_key_field": "order_id", "sort_key_field": "line_id"}
# (table options, consumer options) -> the same settings as the runtime's Config reads them
SETTINGS_OF = {
    "partition_key_name": "partition_key",
    "sort_key_name": "sort_key",
    "time_to_live_attribute": "ttl_attribute",
}


def _refusal(table_options: dict[str, Any], options: dict[str, Any]) -> str:
    stack = new_stack()
    table = IdempotencyTable(stack, "Table", options=TableOptions(**table_options))
    with pytest.raises(ConfigurationError) as raised:
        build_consumer(stack, table=table, **options)
    return str(raised.value)


def test_the_init_layout_with_a_key_prefix_is_refused_at_synth():
    assert _refusal(INIT_TABLE, {**INIT_KEYS, "key_prefix": "shop#", "processor": "orders:handle"}) == (
        "ConsumerOptions.key_prefix 'shop#' cannot be used with ConsumerOptions.partition_key_field "
        "'order_id' in ConsumerOptions.mode 'document': the field is the table's partition key attribute "
        "(TableOptions.partition_key_name), which holds the prefix + its value, so every message would be "
        "refused; rename the table's partition key (e.g. 'pk') or drop the prefix"
    )


@pytest.mark.parametrize(
    ("table_options", "options"),
    [
        (INIT_TABLE, {**INIT_KEYS, "key_prefix": "shop#"}),
        ({"partition_key_name": "order"}, {"partition_key_field": "order.id"}),
        ({}, {"partition_key_field": "sk"}),
        ({}, {"sort_key_field": "pk"}),
        ({"time_to_live_attribute": "expires"}, {"sort_key_field": "expires"}),
        ({}, {"partition_key_field": "idempotency:order"}),
        ({}, {"key_prefix": "p" * 2000}),
        ({}, {"mode": "guarded"}),
    ],
)
def test_a_synth_refusal_is_the_cold_start_refusal_in_the_options_names(table_options, options):
    from idempotent_runtime.config import Config

    from idempotent_pipeline.consumer import SETTING_NAMES

    settings = {SETTINGS_OF[name]: value for name, value in table_options.items()}
    with pytest.raises(ConfigurationError) as cold:  # Config, then what only the cold start knows
        contract.check_settings(Config(table_name="t", **settings, **options).settings())
    expected = str(cold.value)
    for variable, name in sorted(SETTING_NAMES.items(), key=lambda pair: -len(pair[0])):
        expected = expected.replace(variable, name)
    assert _refusal(table_options, options) == expected


@pytest.mark.parametrize(
    ("table_options", "options"),
    [
        (INIT_TABLE, INIT_KEYS),  # init's own layout: the field and the attribute hold the same value
        (INIT_TABLE, {**INIT_KEYS, "key_prefix": "shop#", "mode": "transaction", "processor": "m:f"}),
        (INIT_TABLE, {"key_source": "message_id", "key_prefix": "shop#"}),
        ({}, {"partition_key_field": "pk", "sort_key_field": "sk"}),
    ],
)
def test_settings_that_work_together_synthesize(table_options, options, tmp_path):
    if "processor" in options:  # the body is not stored in transaction mode: a prefix is fine
        (tmp_path / "m.py").write_text("def f(message):\n    return []\n")
        options = {**options, "code_directory": str(tmp_path)}
    stack = new_stack()
    table = IdempotencyTable(stack, "Table", options=TableOptions(**table_options))
    build_consumer(stack, table=table, **options)


def test_a_deploy_time_key_prefix_is_left_to_the_cold_start():
    stack = new_stack()
    prefix = cdk.CfnParameter(stack, "Prefix").value_as_string
    table = IdempotencyTable(stack, "Table", options=TableOptions(**INIT_TABLE))
    build_consumer(stack, table=table, key_prefix=prefix, **INIT_KEYS)
    assert "KEY_PREFIX" in env_of(template_of(stack))


# -- warnings ----------------------------------------------------------------------------------------------


def _warnings(**kwargs: Any) -> list[str]:
    stack = new_stack()
    build_consumer(stack, **kwargs)
    return [message for _, message in warnings_of(stack)]


def test_no_warning_by_default(default_stack):
    assert warnings_of(default_stack) == []


def test_reserved_concurrency_without_max_concurrency_warns():
    (message,) = _warnings(reserved_concurrent_executions=5)
    assert message.startswith(
        "ConsumerOptions.reserved_concurrent_executions (5) is set without max_concurrency"
    )
    assert "throttled receives count toward the queue's max receives" in message
    assert message.endswith("[ack: idempotent-pipeline:reserved-concurrency]")


def test_reserved_concurrency_below_max_concurrency_warns_of_throttling():
    (message,) = _warnings(max_concurrency=10, reserved_concurrent_executions=5)
    assert "is below max_concurrency (10): the event source will be throttled" in message


def test_low_max_receive_count_with_reserved_concurrency_warns():
    stack = new_stack()
    dlq = sqs.Queue(stack, "Dlq", fifo=True)
    queue = fifo_queue(stack, dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=3))
    build_consumer(stack, queue=queue, reserved_concurrent_executions=5, max_concurrency=5)
    (message,) = [m for _, m in warnings_of(stack)]
    assert message.startswith("the queue's max_receive_count is 3 with reserved concurrency")
    assert message.endswith("[ack: idempotent-pipeline:low-max-receive-count]")


def _short_ttl(stack: cdk.Stack) -> list[str]:
    return [m for _, m in warnings_of(stack) if "idempotent-pipeline:short-ttl" in m]


def test_document_lifetime_shorter_than_the_queue_retention_warns():
    stack = new_stack()
    messaging = Messaging(stack, "M", options=MessagingOptions(retention_period=Duration.days(4)))
    build_consumer(stack, queue=messaging.queue, document_ttl=Duration.days(1))
    (message,) = _short_ttl(stack)
    assert message == (
        "ConsumerOptions.document_ttl (86400 seconds) is shorter than the time a duplicate can still "
        "arrive from "
        "queue TestStack/M/Queue (retention 345600 s; 5 receives x 180 s visibility = 900 s): a redelivery "
        "after "
        "its record expired is processed again; make it at least 345600 seconds, or None (never expire) "
        "[ack: idempotent-pipeline:short-ttl]"
    )


def test_dedup_lifetime_is_what_counts_outside_document_mode(user_code):
    stack = new_stack()
    messaging = Messaging(
        stack,
        "M",
        options=MessagingOptions(
            retention_period=Duration.hours(2), visibility_timeout=Duration.hours(1), max_receive_count=10
        ),
    )
    build_consumer(
        stack,
        queue=messaging.queue,
        mode="transaction",
        processor="orders:handle",
        code_directory=str(user_code),
        dedup_ttl=Duration.hours(5),
    )
    (message,) = _short_ttl(stack)
    assert message.startswith("ConsumerOptions.dedup_ttl (18000 seconds) is shorter")
    assert "make it at least 36000 seconds" in message  # 10 receives x 1 hour visibility


def test_lifetimes_that_outlive_every_redelivery_or_never_expire_do_not_warn(user_code):
    stack = new_stack()
    messaging = Messaging(stack, "M", options=MessagingOptions(retention_period=Duration.days(14)))
    build_consumer(stack, queue=messaging.queue, document_ttl=Duration.days(15), dedup_ttl=Duration.hours(1))
    assert _short_ttl(stack) == []  # document mode: the document lifetime counts
    stack = new_stack()
    messaging = Messaging(stack, "M", options=MessagingOptions(retention_period=Duration.days(14)))
    build_consumer(
        stack,
        queue=messaging.queue,
        mode="guarded",
        processor="orders:handle",
        code_directory=str(user_code),
        dedup_ttl=None,
    )
    assert _short_ttl(stack) == []


def test_short_ttl_warning_can_be_acknowledged():
    stack = new_stack()
    messaging = Messaging(stack, "M")
    consumer = build_consumer(stack, queue=messaging.queue, document_ttl=Duration.hours(1))
    cdk.Annotations.of(consumer).acknowledge_warning(
        "idempotent-pipeline:short-ttl", "producers never resend"
    )
    assert _short_ttl(stack) == []


# -- the processor, read (not imported) at synth ------------------------------------------------------------


@pytest.fixture
def code(tmp_path):
    def write(module: str, source: str) -> str:
        path = tmp_path / f"{module}.py"
        path.write_text(source)
        return str(tmp_path)

    return write


@pytest.mark.parametrize(
    ("source", "processor"),
    [
        ("def handle(message, table):\n    pass\n", "orders:handle"),
        ("async def handle(message):\n    pass\n", "orders:handle"),
        ("from helpers import handle\n", "orders:handle"),
        ("import json\nhandle = json.loads\n", "orders:handle"),
        (
            "try:\n    from fast import handle\nexcept ImportError:\n    def handle(m):\n        pass\n",
            "orders:handle",
        ),
        ("class Orders:\n    def handle(self, message):\n        pass\n", "orders:Orders.handle"),
        ("class Orders(Base):\n    pass\n", "orders:Orders.handle"),  # may be inherited
        ("from helpers import *\n", "orders:handle"),  # cannot be known without importing
        (
            "import sys\nraise SystemExit('never imported at synth')\ndef handle(m):\n    pass\n",
            "orders:handle",
        ),
    ],
)
def test_processor_found_in_its_module(code, source, processor):
    env = env_of(consumer_template(processor=processor, code_directory=code("orders", source)))
    assert env["PROCESSOR"] == processor


@pytest.mark.parametrize(
    ("source", "processor", "message"),
    [
        (
            "def handle(message, table):\n    pass\ndef helper():\n    pass\n",
            "orders:handel",
            "processor 'orders:handel': orders.py defines no 'handel' at module level (its functions: "
            "handle, "
            "helper)",
        ),
        (
            "class Orders:\n    def handle(self, message):\n        pass\n",
            "orders:Orders.charge",
            "processor 'orders:Orders.charge': orders.py class 'Orders' defines no 'charge'",
        ),
    ],
)
def test_processor_missing_from_its_module_is_rejected(code, source, processor, message):
    _rejects(message, processor=processor, code_directory=code("orders", source))


def test_a_module_this_python_cannot_parse_is_not_checked_and_says_so(code):
    stack = new_stack()
    build_consumer(stack, processor="orders:handle", code_directory=code("orders", "def handle(:\n"))
    ((_, message),) = warnings_of(stack)
    assert message.startswith("processor 'orders:handle' was not checked: ")
    assert message.endswith("[ack: idempotent-pipeline:processor-unchecked]")


def test_processor_module_may_be_a_package_module(tmp_path):
    (tmp_path / "shop" / "orders").mkdir(parents=True)
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "orders" / "__init__.py").write_text("def handle(message, table):\n    pass\n")
    template = consumer_template(
        mode="transaction", processor="shop.orders:handle", code_directory=str(tmp_path)
    )
    assert env_of(template)["PROCESSOR"] == "shop.orders:handle"


def test_processor_format_and_directory_are_checked(user_code, tmp_path):
    _rejects(
        "ConsumerOptions.processor must look like 'module:function' (e.g. 'orders:handle'); got "
        "'orders.handle'",
        processor="orders.handle",
        code_directory=str(user_code),
    )
    _rejects(
        "ConsumerOptions.processor 'orders:handle' needs code_directory: the directory holding module "
        "'orders'",
        processor="orders:handle",
    )
    _rejects(
        f"ConsumerOptions.code_directory is set ('{user_code}') but processor is not; give processor as "
        "'module:function' naming a function in that directory",
        code_directory=str(user_code),
    )
    _rejects(
        f"ConsumerOptions.code_directory must be an existing directory; got '{tmp_path / 'missing'}'",
        processor="orders:handle",
        code_directory=str(tmp_path / "missing"),
    )
    _rejects(
        f"processor module 'billing' is not in code_directory '{tmp_path}' (looked for billing/__init__.py "
        "and billing.py)",
        processor="billing:handle",
        code_directory=str(tmp_path),
    )
    _rejects(
        "ConsumerOptions.processor must name a module of your own code; got "
        "'idempotent_runtime.handler:handler'",
        processor="idempotent_runtime.handler:handler",
        code_directory=str(user_code),
    )


def test_code_directory_must_not_shadow_the_runtime(tmp_path):
    (tmp_path / "idempotent_runtime").mkdir()
    (tmp_path / "orders.py").write_text("def handle(message, table):\n    pass\n")
    _rejects(
        f"ConsumerOptions.code_directory must not contain 'idempotent_runtime': it would shadow the bundled "
        f"runtime; got '{tmp_path}'",
        processor="orders:handle",
        code_directory=str(tmp_path),
    )


# -- real apps: VPC, tracing, layers ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def vpc_template() -> assertions.Template:
    stack = new_stack()
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=0, restrict_default_security_group=False)
    group = ec2.SecurityGroup(stack, "Group", vpc=vpc)
    build_consumer(
        stack,
        vpc=vpc,
        vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
        security_groups=[group],
        tracing=lambda_.Tracing.ACTIVE,
        layers=[lambda_.LayerVersion.from_layer_version_arn(stack, "Layer", LAYER)],
    )
    return template_of(stack)


LAYER = "arn:aws:lambda:eu-west-1:111122223333:layer:shared:3"


def test_vpc_places_the_function_in_the_chosen_subnets_and_groups(vpc_template):
    config = function_props(vpc_template)["VpcConfig"]
    group_id = logical_id(vpc_template, "AWS::EC2::SecurityGroup", "Group")
    assert config["SecurityGroupIds"] == [{"Fn::GetAtt": [group_id, "GroupId"]}]
    assert len(config["SubnetIds"]) == 2
    assert all("Isolated" in subnet["Ref"] for subnet in config["SubnetIds"])


def test_vpc_network_interface_permissions_without_a_managed_policy(vpc_template):
    role = only(vpc_template, "AWS::IAM::Role")["Properties"]
    assert "ManagedPolicyArns" not in role
    policy_id = logical_id(vpc_template, "AWS::IAM::Policy", "NetworkInterfacePolicy")
    policy = resources(vpc_template, "AWS::IAM::Policy")[policy_id]["Properties"]
    assert policy["PolicyDocument"]["Statement"] == [
        {"Action": sorted(NETWORK_INTERFACE_ACTIONS), "Effect": "Allow", "Resource": "*"}
    ]
    function = only(vpc_template, "AWS::Lambda::Function")
    assert policy_id in function["DependsOn"]  # Lambda checks the permissions when it creates the function


def test_tracing_is_active_with_its_permissions(vpc_template):
    assert function_props(vpc_template)["TracingConfig"] == {"Mode": "Active"}
    xray = [s for s in policy_statements(vpc_template) if "xray:PutTraceSegments" in actions_of(s)]
    assert [(sorted(actions_of(s)), s["Resource"]) for s in xray] == [
        (["xray:PutTelemetryRecords", "xray:PutTraceSegments"], "*")
    ]


def test_layers_are_attached(vpc_template):
    assert function_props(vpc_template)["Layers"] == [LAYER]


# -- alarms and metrics ----------------------------------------------------------------------------------


def _metric_alarms(template: assertions.Template) -> dict[str, dict[str, Any]]:
    return {a["MetricName"]: a for a in alarms_of(template).values()}


def test_alarms_on_the_runtimes_metrics_and_invocation_errors(from_messaging):
    consumer, template = from_messaging
    function_id = logical_id(template, "AWS::Lambda::Function", "Function")
    alarms = _metric_alarms(template)
    runtime_alarms = {name: alarms[name] for name in ("failed", "quarantined", "conflicts", "misconfigured")}
    for name, alarm in runtime_alarms.items():
        assert alarm["Namespace"] == contract.METRICS_NAMESPACE.default, name
        assert alarm["Dimensions"] == [{"Name": contract.METRICS_DIMENSION, "Value": {"Ref": function_id}}]
        assert (alarm["Statistic"], alarm["ComparisonOperator"]) == ("Sum", "GreaterThanOrEqualToThreshold")
    assert (runtime_alarms["failed"]["Threshold"], runtime_alarms["failed"]["Period"]) == (10, 300)
    for name in ("quarantined", "conflicts", "misconfigured"):
        assert (runtime_alarms[name]["Threshold"], runtime_alarms[name]["Period"]) == (1, 60)
    assert (alarms["Errors"]["Namespace"], alarms["Errors"]["Threshold"]) == ("AWS/Lambda", 1)
    # The Messaging alarms on its queue and DLQ already: no second alarm here.
    assert len(consumer.alarms) == 5
    assert (
        sum(1 for a in alarms_of(template).values() if a["MetricName"] == "ApproximateAgeOfOldestMessage")
        == 1
    )


def test_a_consumer_of_a_queue_of_its_own_alarms_on_that_queue_and_its_dlq():
    stack = new_stack()
    dlq = fifo_queue(stack, "Dlq")
    build_consumer(
        stack, dead_letter_queue=dlq, alarm_options=AlarmOptions(max_message_age=Duration.minutes(5))
    )
    alarms = _metric_alarms(template_of(stack))
    assert alarms["ApproximateAgeOfOldestMessage"]["Threshold"] == 300
    assert alarms["ApproximateNumberOfMessagesVisible"]["Threshold"] == 1


def test_own_message_age_alarm_must_be_below_the_queue_retention():
    stack = new_stack()
    queue = fifo_queue(stack, retention_period=Duration.minutes(5))
    _rejects(
        "AlarmOptions.max_message_age (600 seconds) must be shorter than the retention period of queue "
        "TestStack/Queue (300 seconds): no message gets that old before it expires, so the message-age "
        "alarm could never fire",
        stack,
        queue=queue,
    )


def test_alarm_thresholds_are_configurable():
    template = consumer_template(
        alarm_options=AlarmOptions(failed_threshold=3, failed_period=Duration.minutes(15))
    )
    failed = _metric_alarms(template)["failed"]
    assert (failed["Threshold"], failed["Period"]) == (3, 900)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"failed_period": Duration.seconds(90)},
            "AlarmOptions.failed_period must be a whole number of minutes",
        ),
        ({"failed_threshold": 0}, "AlarmOptions.failed_threshold must be at least 1; got 0"),
        (
            {"max_message_age": Duration.seconds(30)},
            "AlarmOptions.max_message_age must be at least 60 seconds",
        ),
        (
            {"failed_period": Duration.days(8)},
            r"AlarmOptions.failed_period must be at most 7 days \(CloudWatch: period x evaluation periods <= "
            r"604800 seconds\); got 691200 seconds$",
        ),
    ],
)
def test_alarm_options_are_checked(options, message):
    with pytest.raises(ConfigurationError, match=f"^{message}"):
        build_consumer(new_stack(), alarm_options=AlarmOptions(**options))


def test_a_seven_day_failed_period_is_accepted():
    failed = _metric_alarms(consumer_template(alarm_options=AlarmOptions(failed_period=Duration.days(7))))
    assert failed["failed"]["Period"] == 7 * 24 * 3600


def test_a_deploy_time_failed_threshold_reaches_the_alarm():
    stack = new_stack()
    threshold = cdk.CfnParameter(stack, "Threshold", type="Number").value_as_number
    build_consumer(stack, alarm_options=AlarmOptions(failed_threshold=threshold))
    assert _metric_alarms(template_of(stack))["failed"]["Threshold"] == {"Ref": "Threshold"}


def test_a_deploy_time_failed_period_is_refused_by_name():
    """CDK needs the period as a number; without this its own error names neither option nor value."""
    stack = new_stack()
    period = cdk.CfnParameter(stack, "Period", type="Number").value_as_number
    with pytest.raises(ConfigurationError, match=r"^AlarmOptions.failed_period must be known at synth"):
        build_consumer(stack, alarm_options=AlarmOptions(failed_period=Duration.seconds(period)))


def test_metrics_are_the_runtimes_counters_for_this_function(from_messaging):
    consumer, _ = from_messaging
    stack = cdk.Stack.of(consumer)
    function_name = stack.resolve(consumer.function.function_name)
    methods = {
        "processed": consumer.metric_processed,
        "duplicates": consumer.metric_duplicates,
        "conflicts": consumer.metric_conflicts,
        "failed": consumer.metric_failed,
        "quarantined": consumer.metric_quarantined,
        "misconfigured": consumer.metric_misconfigured,
        "stale": consumer.metric_stale,
    }
    assert set(methods) == {m.value for m in contract.Metric}
    for name, method in methods.items():
        metric = method(period=Duration.minutes(5))
        assert isinstance(metric, cloudwatch.Metric)
        assert (metric.namespace, metric.metric_name, metric.statistic) == ("IdempotentPipeline", name, "Sum")
        assert stack.resolve(metric.dimensions) == {"FunctionName": function_name}
        assert metric.period.to_seconds() == 300


def test_duplicate_rate_is_a_math_expression(from_messaging):
    consumer, _ = from_messaging
    rate = consumer.metric_duplicate_rate()
    assert isinstance(rate, cloudwatch.MathExpression)
    assert rate.expression == "100 * duplicates / (processed + duplicates)"
    assert set(rate.using_metrics) == {"duplicates", "processed"}


def test_alarms_can_be_turned_off():
    assert alarms_of(consumer_template(alarm_options=AlarmOptions(enabled=False))) == {}


# -- code asset (more in test_constructs_asset.py) ------------------------------------------------------


def test_code_asset_is_the_same_for_the_same_code():
    """Staging places files in a fresh directory each time; the asset hash depends on content only."""
    keys = []
    for name in ("One", "Two"):
        stack = new_stack(name)
        build_consumer(stack)
        keys.append(function_props(template_of(stack))["Code"]["S3Key"])
    assert keys[0] == keys[1]


def test_missing_runtime_package_is_reported(monkeypatch):
    import idempotent_pipeline._asset as asset

    monkeypatch.setattr(asset.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigurationError, match=r"the idempotent_runtime package is not importable"):
        build_consumer(new_stack())


# -- inputs a review found unchecked -------------------------------------------------------------------


def test_a_consumer_refuses_its_own_queue_as_dead_letter_queue():
    stack = new_stack()
    queue = fifo_queue(stack)
    with pytest.raises(
        ConfigurationError,
        match=r"^dead_letter_queue must be another queue than the one the consumer reads \(TestStack/Queue\)",
    ):
        build_consumer(stack, queue=queue, dead_letter_queue=queue)


def test_a_consumer_refuses_its_own_imported_queue_as_dead_letter_queue():
    stack = new_stack()
    arn = "arn:aws:sqs:us-east-1:123456789012:orders.fifo"
    queue = sqs.Queue.from_queue_attributes(stack, "Queue", queue_arn=arn, fifo=True)
    same = sqs.Queue.from_queue_attributes(stack, "Same", queue_arn=arn, fifo=True)
    with pytest.raises(ConfigurationError, match=r"^dead_letter_queue must be another queue"):
        build_consumer(stack, queue=queue, dead_letter_queue=same)


@pytest.mark.parametrize("namespace", ["AWS/Lambda", "AWS/"])
def test_metrics_namespaces_of_aws_services_are_refused(namespace):
    with pytest.raises(ConfigurationError, match=r"or with 'AWS/'.*; got '" + namespace):
        build_consumer(new_stack(), metrics_namespace=namespace)


def test_variables_lambda_reserves_are_refused_by_name():
    with pytest.raises(
        ConfigurationError,
        match=r"^ConsumerOptions.environment may not set variables Lambda reserves for itself; got "
        r"AWS_REGION, LAMBDA_TASK_ROOT$",
    ):
        build_consumer(
            new_stack(), environment={"AWS_REGION": "eu-west-1", "LAMBDA_TASK_ROOT": "/x", "OK": "1"}
        )


def test_deploy_time_key_fields_reach_the_function_as_they_are():
    stack = new_stack()
    field = cdk.CfnParameter(stack, "Field", default="order.id").value_as_string
    build_consumer(stack, partition_key_field=field, sort_key_field="line")
    env = env_of(template_of(stack))
    assert env[contract.PARTITION_KEY_FIELD.name] == {"Ref": "Field"}
    assert env[contract.SORT_KEY_FIELD.name] == "line"


def test_a_deploy_time_key_field_without_the_other_is_refused_naming_it():
    """A deploy-time value is still set: the pair's other field is missing whatever the value."""
    stack = new_stack()
    field = cdk.CfnParameter(stack, "Field", default="order.id").value_as_string
    with pytest.raises(ConfigurationError, match=r"ConsumerOptions.sort_key_field None; set the other one"):
        build_consumer(stack, partition_key_field=field)


@pytest.mark.parametrize("prop", ["include", "exclude"])
def test_deploy_time_asset_patterns_are_refused_by_name(prop, user_code):
    stack = new_stack()
    pattern = cdk.CfnParameter(stack, "Pattern", default="x").value_as_string
    with pytest.raises(ConfigurationError, match=rf"^ConsumerOptions.{prop} must be known at synth"):
        build_consumer(stack, processor="orders:handle", code_directory=str(user_code), **{prop: [pattern]})


@pytest.mark.parametrize("unit", ["minutes", "days"])
def test_a_deploy_time_duration_in_another_unit_than_seconds_is_refused_by_name(unit):
    stack = new_stack()
    days = cdk.CfnParameter(stack, "Days", type="Number", default=7).value_as_number
    with pytest.raises(
        ConfigurationError,
        match=r"^ConsumerOptions.dedup_ttl from a deploy-time value must be given in seconds",
    ):
        build_consumer(stack, dedup_ttl=getattr(Duration, unit)(days))


def test_a_deploy_time_duration_in_seconds_reaches_the_function():
    stack = new_stack()
    ttl = cdk.CfnParameter(stack, "Ttl", type="Number", default=3600).value_as_number
    build_consumer(stack, dedup_ttl=Duration.seconds(ttl))
    assert env_of(template_of(stack))[contract.DEDUP_TTL_SECONDS.name] == {"Ref": "Ttl"}
