"""The reference stack (app.py + cdk.json): context keys, `npx cdk synth`, cfn-lint and cdk-nag for every
option."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs_helpers import (
    CFN_LINT_IGNORED,
    REPO,
    VENV_BIN,
    cdk_json_context,
    cfn_lint_findings,
    cloudwatch_may_publish,
    nag_findings,
    needs_reference_app,
    new_stack,
)

import app as reference_app
from idempotent_pipeline import ConfigurationError, ConsumerOptions, IdempotentPipeline

pytestmark = needs_reference_app

STACK = reference_app.DEFAULT_STACK_NAME

# Resource types of the default reference stack. All are types moto's CloudFormation creates or that the local
# emulator teaches it (AWS::SNS::Subscription, AWS::SQS::QueuePolicy); dynamodb.Table, not TableV2's
# AWS::DynamoDB::GlobalTable. A new type here needs a look at the local emulator first.
REFERENCE_TYPES = {
    "AWS::SNS::Topic",
    "AWS::SNS::TopicPolicy",
    "AWS::SNS::Subscription",
    "AWS::SQS::Queue",
    "AWS::SQS::QueuePolicy",
    "AWS::DynamoDB::Table",
    "AWS::IAM::Role",
    "AWS::IAM::Policy",
    "AWS::Logs::LogGroup",
    "AWS::Lambda::Function",
    "AWS::Lambda::EventSourceMapping",
    "AWS::CloudWatch::Alarm",
}
OUTPUTS = {
    "TopicArn",
    "QueueUrl",
    "DeadLetterQueueUrl",
    "SubscriptionDeadLetterQueueUrl",
    "TableName",
    "FunctionName",
}


def synth_app(outdir: Path, context: dict[str, Any] | None = None) -> cdk.CloudAssembly:
    """app.py's app with cdk.json's context (as the CLI passes it) plus ``context``, cdk-nag attached."""
    app = reference_app.build_app({**cdk_json_context(), **(context or {})}, outdir=str(outdir))
    return app.synth()


# -- `npx cdk synth` of app.py -------------------------------------------------------------------------


def test_cdk_synth_writes_the_reference_template(cli_synth_dir):
    template = json.loads((cli_synth_dir / f"{STACK}.template.json").read_text())
    # AWS::CDK::Metadata is the CLI's version reporting; moto skips it with a warning.
    assert {r["Type"] for r in template["Resources"].values()} - {"AWS::CDK::Metadata"} == REFERENCE_TYPES
    assert set(template["Outputs"]) == OUTPUTS


def test_cdk_synth_names_the_table_so_a_replacement_fails_the_deploy(cli_synth_dir):
    """cdk.json sets @idempotent-pipeline:explicitTableName: a key change would replace a custom-named table,
    which CloudFormation refuses, instead of writing to a new, empty table."""
    template = json.loads((cli_synth_dir / f"{STACK}.template.json").read_text())
    (table,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    assert table["Properties"]["TableName"] == f"{STACK}-Table-56E979C8"
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_cdk_synth_output_passes_cfn_lint_cli(cli_synth_dir):
    template = cli_synth_dir / f"{STACK}.template.json"
    ignored = [arg for rule in sorted(CFN_LINT_IGNORED) for arg in ("--ignore-checks", rule)]
    result = subprocess.run(
        [str(VENV_BIN / "cfn-lint"), *ignored, "--", str(template)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_cdk_synth_ran_cdk_nag_with_zero_findings(cli_synth_dir):
    """The CLI synth succeeded with the AwsSolutions plugin attached, and its report lists nothing."""
    assert nag_findings(cli_synth_dir) == []


def test_cdk_synth_asset_holds_the_runtime(cli_synth_dir):
    template = json.loads((cli_synth_dir / f"{STACK}.template.json").read_text())
    (function,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    asset = cli_synth_dir / f"asset.{function['Properties']['Code']['S3Key'].removesuffix('.zip')}"
    assert (asset / "idempotent_runtime" / "__init__.py").is_file()
    assert (asset / "idempotent_runtime" / "handler.py").is_file()


def test_cloudformation_names_the_queues(cli_synth_dir):
    """Explicit names break destroy-then-deploy within 60 s; the local emulator names a queue itself."""
    template = json.loads((cli_synth_dir / f"{STACK}.template.json").read_text())
    queues = [r for r in template["Resources"].values() if r["Type"] == "AWS::SQS::Queue"]
    assert len(queues) == 3 and not [q for q in queues if "QueueName" in q["Properties"]]


# -- cdk-nag and cfn-lint: zero findings with every option ---------------------------------------------------


VARIANTS = {
    "default": {},
    "standard queues": {"fifo": "false"},
    "standard queues with content-based deduplication off": {
        "fifo": "false",
        "content_based_deduplication": "false",
    },
    "standard queue without a topic, big batches": {
        "fifo": "false",
        "topic": "false",
        "batch_size": "1000",
        "max_batching_window_seconds": "10",
    },
    "dashboard": {"dashboard": "true"},
    "high throughput": {"high_throughput": "true"},
    "alarm topic": {"alarm_topic": "true"},
    "two hops through the outbox": {"outbox": "true"},
    "two hops through the outbox, customer-managed keys": {"outbox": "true", "customer_managed_keys": "true"},
    "no explicit table name": {"@idempotent-pipeline:explicitTableName": False},
    "tracing": {"tracing": "true"},
    "vpc": {"vpc": "true"},
    "customer-managed keys and an encrypted alarm topic": {
        "customer_managed_keys": "true",
        "alarm_topic": "true",
    },
    "customer-managed keys without a topic": {"topic": "false", "customer_managed_keys": "true"},
    "customer-managed keys without a topic, with an encrypted alarm topic": {
        "topic": "false",
        "customer_managed_keys": "true",
        "alarm_topic": "true",
    },
    "workflow in a vpc with customer-managed keys": {
        "workflow": "true",
        "vpc": "true",
        "customer_managed_keys": "true",
    },
    "durable function in a vpc with customer-managed keys": {
        "durable": "true",
        "vpc": "true",
        "customer_managed_keys": "true",
    },
    "everything": {
        "fifo": "false",
        "dashboard": "true",
        "tracing": "true",
        "vpc": "true",
        "customer_managed_keys": "true",
        "alarm_topic": "true",
        "mode": "transaction",
        "max_concurrency": "5",
        "reserved_concurrent_executions": "10",
    },
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_reference_stack_with_each_option_has_no_cdk_nag_or_cfn_lint_findings(variant, tmp_path, user_code):
    context = dict(VARIANTS[variant])
    if context.get("durable") and not hasattr(lambda_, "DurableConfig"):
        pytest.skip("this aws-cdk-lib has no durable functions (refused: test_constructs_durable.py)")
    if context.get("mode") == "transaction":
        context.update(processor="orders:handle", code_directory=str(user_code))
    assembly = synth_app(tmp_path, context)
    assert nag_findings(tmp_path) == []
    assert cfn_lint_findings(assembly.get_stack_by_name(STACK).template) == []


@pytest.mark.parametrize("mode", ["document", "transaction", "guarded"])
def test_each_mode_passes_cfn_lint(mode, user_code):
    stack = new_stack(f"Mode{mode.title()}")
    processor = {} if mode == "document" else {"processor": "orders:handle", "code_directory": str(user_code)}
    IdempotentPipeline(stack, "Pipeline", consumer_options=ConsumerOptions(mode=mode, **processor))
    assert cfn_lint_findings(stack.node.root.synth().get_stack_by_name(stack.stack_name).template) == []


def test_cfn_lint_ignores_only_documented_rules():
    assert set(CFN_LINT_IGNORED) == {"W3005"}
    assert all(reason for reason in CFN_LINT_IGNORED.values())


# -- context keys ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def context_template(tmp_path_factory, user_code) -> dict[str, Any]:
    context = {
        "stack_name": "Orders",
        "table_name": "orders-v2",
        "partition_key_name": "order_id",
        "sort_key_name": "line_id",
        "time_to_live_attribute": "expires",
        "dedup_ttl_seconds": "3600",  # -c values arrive as strings
        "document_ttl_seconds": "never",
        "mode": "guarded",
        "processor": "orders:handle",
        "code_directory": str(user_code),
        "exclude": "helpers",
        "lease_seconds": 40,  # cdk.json values keep their JSON type
        "lease_margin_seconds": "5",
        "timeout_seconds": "20",
        "batch_size": "5",
        "max_receive_count": "5",
        "max_concurrency": "4",
        "reserved_concurrent_executions": "8",
        "memory_size": "512",
        "architecture": "x86_64",
        "high_throughput": "true",
        "content_based_deduplication": False,
        "removal_policy": "destroy",
        "deletion_protection": "true",
        "runtime": "python3.14",
        "max_workers": "2",
        "log_level": "WARNING",
        "metrics_namespace": "Orders",
        "key_source": "fields",
        "partition_key_field": "order.id",
        "sort_key_field": "line",
        "key_prefix": "eu#",
        "fingerprint_exclude": "sent_at, trace.id",
        "on_conflict": "duplicate",
        "visibility_timeout_seconds": "150",
        "retention_period_seconds": "86400",
        "max_message_age_seconds": "300",
        "failed_threshold": "3",
        "tracing": "true",
        "dashboard": "true",
        "alarm_topic": "true",
        "fifo": "true",
        "topic": "true",
    }
    outdir = tmp_path_factory.mktemp("context")
    return synth_app(outdir, context).get_stack_by_name("Orders").template


def _one(template: dict[str, Any], type_: str) -> dict[str, Any]:
    found = [r for r in template["Resources"].values() if r["Type"] == type_]
    assert len(found) == 1, type_
    return found[0]


def test_every_context_key_is_applied(context_template):
    res = context_template["Resources"]
    table = _one(context_template, "AWS::DynamoDB::Table")
    assert [k["AttributeName"] for k in table["Properties"]["KeySchema"]] == ["order_id", "line_id"]
    assert table["Properties"]["TimeToLiveSpecification"]["AttributeName"] == "expires"
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert table["Properties"]["TableName"] == "orders-v2"
    function = _one(context_template, "AWS::Lambda::Function")["Properties"]
    assert (function["Timeout"], function["MemorySize"], function["ReservedConcurrentExecutions"]) == (
        20,
        512,
        8,
    )
    assert (function["Architectures"], function["TracingConfig"]) == (["x86_64"], {"Mode": "Active"})
    assert function["Runtime"] == "python3.14"
    env = function["Environment"]["Variables"]
    assert {k: env[k] for k in env if k not in ("TABLE_NAME", "DLQ_URL")} == {
        "PARTITION_KEY": "order_id",
        "SORT_KEY": "line_id",
        "TTL_ATTRIBUTE": "expires",
        "DEDUP_TTL_SECONDS": "3600",
        "IDEMPOTENCY_MODE": "guarded",
        "KEY_SOURCE": "fields",
        "PARTITION_KEY_FIELD": "order.id",
        "SORT_KEY_FIELD": "line",
        "KEY_PREFIX": "eu#",
        "FINGERPRINT_EXCLUDE": '["sent_at","trace.id"]',
        "ON_CONFLICT": "duplicate",
        "QUEUE_TYPE": "fifo",
        "MAX_RECEIVE_COUNT": "5",
        "PROCESSOR": "orders:handle",
        "LEASE_SECONDS": "40",
        "LEASE_MARGIN_SECONDS": "5",
        "MAX_WORKERS": "2",
        "METRICS_NAMESPACE": "Orders",
        "LOG_LEVEL": "WARNING",
    }
    mapping = _one(context_template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert (mapping["BatchSize"], mapping["ScalingConfig"]) == (5, {"MaximumConcurrency": 4})
    queues = [r["Properties"] for r in res.values() if r["Type"] == "AWS::SQS::Queue"]
    queue = next(q for q in queues if "RedrivePolicy" in q)
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 5
    assert (queue["VisibilityTimeout"], queue["MessageRetentionPeriod"]) == (150, 86400)
    assert queue["FifoThroughputLimit"] == "perMessageGroupId"
    assert queue["ContentBasedDeduplication"] is False
    alarms = [r["Properties"] for r in res.values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert {a["MetricName"]: a["Threshold"] for a in alarms}["ApproximateAgeOfOldestMessage"] == 300
    assert {a["MetricName"]: a["Threshold"] for a in alarms}["failed"] == 3
    alarm_topic = next(k for k, r in res.items() if r["Type"] == "AWS::SNS::Topic" and "AlarmTopic" in k)
    assert all(a["AlarmActions"] == [{"Ref": alarm_topic}] for a in alarms)
    assert _one(context_template, "AWS::CloudWatch::Dashboard")


@pytest.mark.parametrize(
    "context",
    [
        {"alarm_topic": "true"},
        {"alarm_topic": "true", "customer_managed_keys": "true"},
        {"alarm_topic": "true", "customer_managed_keys": "true", "topic": "false"},
    ],
    ids=["plain", "customer-managed keys", "customer-managed keys without a topic"],
)
def test_cloudwatch_may_publish_to_the_reference_alarm_topic(context, tmp_path):
    template = synth_app(tmp_path, {**context, "nag": False}).get_stack_by_name(STACK).template
    (alarm_topic,) = [
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::SNS::Topic" and "AlarmTopic" in k
    ]
    assert cloudwatch_may_publish(template, alarm_topic)


@pytest.mark.parametrize("topic", ["true", "false"])
def test_the_reference_alarm_topic_has_a_key_of_its_own(topic, tmp_path):
    """CloudWatch may use the alarm topic's key for every alarm of the account: the pipeline topic's key
    (which encrypts the messages) must not be that key."""
    context = {"alarm_topic": "true", "customer_managed_keys": "true", "topic": topic, "nag": False}
    template = synth_app(tmp_path, context).get_stack_by_name(STACK).template
    res = template["Resources"]
    keys = {k: r for k, r in res.items() if r["Type"] == "AWS::KMS::Key"}
    (alarm_key,) = [k for k in keys if k.startswith("AlarmTopicKey")]
    (alarm_topic,) = [k for k, r in res.items() if r["Type"] == "AWS::SNS::Topic" and "AlarmTopic" in k]
    assert res[alarm_topic]["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [alarm_key, "Arn"]}

    def cloudwatch_on(key: str) -> bool:
        return any(
            s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
            for s in keys[key]["Properties"]["KeyPolicy"]["Statement"]
        )

    assert cloudwatch_on(alarm_key)
    assert [k for k in keys if cloudwatch_on(k)] == [alarm_key]
    assert len(keys) == (3 if topic == "true" else 2)  # data, (pipeline topic,) alarm topic


def test_context_table_documents_every_key():
    assert set(reference_app.CONTEXT) == {
        "fifo",
        "topic",
        "high_throughput",
        "content_based_deduplication",
        "visibility_timeout_seconds",
        "retention_period_seconds",
        "max_receive_count",
        "table_name",
        "partition_key_name",
        "sort_key_name",
        "time_to_live_attribute",
        "removal_policy",
        "deletion_protection",
        "mode",
        "key_source",
        "partition_key_field",
        "sort_key_field",
        "key_prefix",
        "fingerprint_fields",
        "fingerprint_exclude",
        "on_conflict",
        "dedup_ttl_seconds",
        "document_ttl_seconds",
        "lease_seconds",
        "lease_margin_seconds",
        "version_field",
        "tombstone_ttl_seconds",
        "processor",
        "code_directory",
        "include",
        "exclude",
        "timeout_seconds",
        "memory_size",
        "architecture",
        "runtime",
        "batch_size",
        "max_batching_window_seconds",
        "max_concurrency",
        "reserved_concurrent_executions",
        "max_workers",
        "log_level",
        "metrics_namespace",
        "tracing",
        "max_message_age_seconds",
        "failed_threshold",
        "dashboard",
        "vpc",
        "customer_managed_keys",
        "alarm_topic",
        "outbox",
        "workflow",
        "durable",
        "ttl_seconds",  # retired: refused with its replacement
    }


def test_every_context_key_is_in_docs_constructs_md():
    doc = (REPO / "docs" / "constructs.md").read_text()
    for key in reference_app.CONTEXT:
        assert f"`{key}`" in doc, key


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"dedup_ttl_seconds": "0", "document_ttl_seconds": "0"}, ("0", "0")),
        ({"dedup_ttl_seconds": "never", "document_ttl_seconds": "86400"}, ("0", "86400")),
    ],
)
def test_zero_or_never_means_never_expire(context, expected, tmp_path):
    template = synth_app(tmp_path, {**context, "nag": False}).get_stack_by_name(STACK).template
    env = _one(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert (env["DEDUP_TTL_SECONDS"], env["DOCUMENT_TTL_SECONDS"]) == expected


def test_include_context_key_ships_data_files(tmp_path):
    code = tmp_path / "src"
    code.mkdir()
    (code / "orders.py").write_text("def handle(message, table):\n    return None\n")
    (code / "prices.json").write_text("{}")
    (code / "notes.md").write_text("# left out\n")
    context = {
        "processor": "orders:handle",
        "code_directory": str(code),
        "include": "prices.json",
        "exclude": "notes.md",
        "nag": False,
    }
    template = synth_app(tmp_path / "out", context).get_stack_by_name(STACK).template
    key = _one(template, "AWS::Lambda::Function")["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    asset = tmp_path / "out" / f"asset.{key}"
    assert (asset / "prices.json").is_file() and (asset / "orders.py").is_file()
    assert not (asset / "notes.md").exists()


def test_runtime_context_key_sets_the_functions_runtime(tmp_path):
    # nag off: cdk-nag's L1 flags any Python older than the newest aws-cdk-lib knows
    template = synth_app(tmp_path, {"runtime": "python3.13", "nag": False}).get_stack_by_name(STACK).template
    assert _one(template, "AWS::Lambda::Function")["Properties"]["Runtime"] == "python3.13"


def test_standard_reference_stack_without_a_topic_has_no_topic_outputs(tmp_path):
    template = synth_app(tmp_path, {"fifo": "false", "topic": "false"}).get_stack_by_name(STACK).template
    assert set(template["Outputs"]) == OUTPUTS - {"TopicArn", "SubscriptionDeadLetterQueueUrl"}
    env = _one(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env["QUEUE_TYPE"] == "standard"


@pytest.mark.parametrize(
    ("context", "message"),
    [
        (
            {"ttl_seconds": "86400"},
            "context ttl_seconds is no longer read (got '86400'): use dedup_ttl_seconds (idempotency "
            "records, "
            "default 7 days) and document_ttl_seconds (documents, default never)",
        ),
        (
            {"removal_policy": "snapshot"},
            "context removal_policy must be retain or destroy (DynamoDB tables have no snapshot policy); got "
            "'snapshot'",
        ),
        (
            {"dedup_ttl_seconds": "week"},
            "context dedup_ttl_seconds must be a whole number of seconds, 0 or never (never expire); got "
            "'week'",
        ),
        (
            {"document_ttl_seconds": "-1"},
            "context document_ttl_seconds must be at least 0 seconds; got -1 seconds",
        ),
        ({"batch_size": True}, "context batch_size must be an integer; got True"),
        ({"high_throughput": "maybe"}, "context high_throughput must be true or false; got 'maybe'"),
        (
            {"fingerprint_fields": "a,,b"},
            "context fingerprint_fields: a field path must be a non-empty string; got ''",
        ),
        ({"include": "a,,b"}, "context include must be a comma-separated list of names; got 'a,,b'"),
        ({"architecture": "sparc"}, "context architecture must be arm64 or x86_64; got 'sparc'"),
        (
            {"runtime": "nodejs22.x"},
            "context runtime must name a Python runtime of aws-cdk-lib, e.g. python3.14; got 'nodejs22.x'",
        ),
        (
            {"runtime": "python3.11"},
            "ConsumerOptions.runtime must be a Python runtime from python3.12 on (Amazon Linux 2023, for "
            "which the asset's wheels are installed), e.g. Runtime.PYTHON_3_14; got python3.11",
        ),
        (
            {"mode": "exactly-once"},
            "context mode must be one of document, transaction, guarded, versioned; got 'exactly-once'",
        ),
        ({"batch_size": "20"}, "ConsumerOptions.batch_size must be between 1 and 10 (FIFO queue); got 20"),
        (
            {"fifo": "false", "key_source": "dedup_id"},
            "ConsumerOptions.key_source 'dedup_id' needs a FIFO queue (a standard queue's messages carry no "
            "MessageDeduplicationId); got queue IdempotentPipeline/Pipeline/Messaging/Queue, of type "
            "'standard'",
        ),
    ],
)
def test_bad_context_values_are_rejected_naming_key_and_value(context, message):
    with pytest.raises(ConfigurationError) as raised:
        reference_app.build_app({**cdk_json_context(), "nag": False, **context})
    assert str(raised.value) == message


def _with_naive_queue(context: dict[str, Any], outdir: Path) -> cdk.App:
    app = reference_app.build_app({**cdk_json_context(), **context}, outdir=str(outdir))
    stack = app.node.find_child(STACK)
    sqs.Queue(stack, "NaiveQueue")  # no DLQ, no TLS-only policy: AwsSolutions-SQS3 and SQS4
    return app


def test_reference_app_attaches_cdk_nag(tmp_path):
    """What makes the zero-finding checks above meaningful: the app's synth fails on a finding."""
    app = _with_naive_queue({}, tmp_path)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert {rule for rule, _, _ in nag_findings(tmp_path)} == {"AwsSolutions-SQS3", "AwsSolutions-SQS4"}


def test_nag_can_be_switched_off_by_context(tmp_path):
    _with_naive_queue({"nag": "false"}, tmp_path).synth()
    assert nag_findings(tmp_path) == []


def test_acknowledged_findings_are_only_the_unavoidable_ones_each_with_its_reason(tmp_path):
    """X-Ray and VPC network interfaces need Resource::*; the subscription's DLQ is a DLQ that SQS3 cannot "
    "see."""
    synth_app(tmp_path, {"tracing": "true", "vpc": "true"})
    metadata = json.loads((tmp_path / f"{STACK}.metadata.json").read_text())
    acknowledged = {
        (path.removeprefix(f"/{STACK}/Pipeline/"), rule): reason
        for path, entries in metadata.items()
        if path.startswith(f"/{STACK}/Pipeline/")
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule, reason in entry["data"].items()
    }
    assert set(acknowledged) == {
        ("Messaging/SubscriptionDeadLetterQueue", "Annotation::AwsSolutions-SQS3"),
        ("Consumer/Role", "Annotation::AwsSolutions-IAM5[Resource::*]"),
        ("Consumer/NetworkInterfacePolicy", "Annotation::AwsSolutions-IAM5[Resource::*]"),
    }
    assert "X-Ray" in acknowledged[("Consumer/Role", "Annotation::AwsSolutions-IAM5[Resource::*]")]
    assert (
        "network interfaces"
        in acknowledged[("Consumer/NetworkInterfacePolicy", "Annotation::AwsSolutions-IAM5[Resource::*]")]
    )


def test_without_the_acknowledgement_cdk_nag_would_flag_the_subscription_dlq(tmp_path, monkeypatch):
    """The SQS3 acknowledgement is needed (and so is the reason next to it)."""
    from idempotent_pipeline import _compat

    monkeypatch.setattr(_compat, "acknowledge", lambda scope, finding, reason: None)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        synth_app(tmp_path)
    assert [rule for rule, _, _ in nag_findings(tmp_path)] == ["AwsSolutions-SQS3"]


def test_cdk_json_runs_app_py_and_sets_recommended_flags():
    config = json.loads((REPO / "cdk.json").read_text())
    assert config["app"] == "python3 app.py"
    assert config["context"]["@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption"] is True
    assert config["context"]["@aws-cdk/aws-iam:minimizePolicies"] is True


def test_every_hop_of_the_outbox_takes_the_first_pipelines_keys_protection_and_table_options(tmp_path):
    context = {
        "outbox": "true",
        "customer_managed_keys": "true",
        "deletion_protection": "true",
        "removal_policy": "retain",
        "table_name": "orders",
        "retention_period_seconds": "86400",
        "tracing": "true",
        "memory_size": "512",
    }
    template = synth_app(tmp_path, context).get_stack_by_name(STACK).template
    resources = template["Resources"]

    def of(type_: str) -> dict[str, dict]:
        return {name: r for name, r in resources.items() if r["Type"] == type_}

    tables = of("AWS::DynamoDB::Table")
    assert sorted(t["Properties"]["TableName"] for t in tables.values()) == [
        "orders",
        "orders-payments",
        "orders-shipping",
    ]
    for table in tables.values():  # on main: the payments and shipping tables had none of these
        assert table["Properties"]["SSESpecification"]["SSEType"] == "KMS"
        assert table["Properties"]["DeletionProtectionEnabled"] is True
        assert table["DeletionPolicy"] == "Retain"
    assert len(of("AWS::SNS::Topic")) == 3
    for topic in of("AWS::SNS::Topic").values():
        assert "KmsMasterKeyId" in topic["Properties"]
    queues = {
        name: queue
        for name, queue in of("AWS::SQS::Queue").items()
        if "Relay" not in name  # the relays' dead-letter queues: OutboxRelay's own settings
    }
    assert len(queues) == 9  # a queue, its DLQ and the subscription's DLQ per pipeline
    for name, queue in queues.items():
        assert "KmsMasterKeyId" in queue["Properties"], name
    for name, queue in queues.items():
        if "DeadLetter" not in name and "Subscription" not in name:
            assert queue["Properties"]["MessageRetentionPeriod"] == 86400, name
    for name, function in of("AWS::Lambda::Function").items():
        if "Relay" not in name:
            assert function["Properties"]["MemorySize"] == 512, name
            assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}, name
