"""OutboxRelay and the consumer's emit_target: the table's stream, the filtered mapping, the dead-letter
queue, the grants, the alarms, the relay's own asset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs_helpers import (
    actions_of,
    alarms_of,
    cfn_lint_findings,
    files_under,
    nag_findings,
    new_stack,
    only,
    policy_statements,
    resources,
    resources_of,
    synth_with_nag,
    template_of,
)
from idempotent_runtime.contract import ConfigurationError

from idempotent_pipeline import (
    ConsumerOptions,
    IdempotencyTable,
    IdempotentConsumer,
    IdempotentPipeline,
    Messaging,
    OutboxRelay,
    _compat,
)

RELAY_MODULE = "idempotent_runtime.relay"
RELAY_HANDLER = RELAY_MODULE + ".handler"
FILTER = {
    "eventName": ["INSERT", "MODIFY"],
    "dynamodb": {"Keys": {"pk": {"S": [{"prefix": "shop#idempotency#outbox#"}]}}},
}


def emitting_consumer(stack, code, target=None, mode="transaction", table=None):
    return IdempotentConsumer(
        stack,
        "Consumer",
        queue=Messaging(stack, "Messaging").queue,
        table=table or IdempotencyTable(stack, "Table"),
        options=ConsumerOptions(
            mode=mode, key_prefix="shop#", processor="orders:handle", code_directory=str(code)
        ),
        emit_target=target if target is not None else sns.Topic(stack, "Payments", fifo=True),
    )


def relay_parts(template):
    """The relay's function (logical id, properties) and its stream mapping's properties."""
    functions = resources(template, "AWS::Lambda::Function")
    (name,) = [k for k, v in functions.items() if v["Properties"]["Handler"] == RELAY_HANDLER]
    (mapping,) = [
        m["Properties"]
        for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": name}
    ]
    return name, functions[name]["Properties"], mapping


def test_the_relay_reads_the_tables_new_images_filtered_to_its_outbox(user_code):
    stack = new_stack()
    consumer = emitting_consumer(stack, user_code)
    template = template_of(stack)
    table_id = next(iter(resources(template, "AWS::DynamoDB::Table")))
    table = only(template, "AWS::DynamoDB::Table")["Properties"]
    assert table["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    _, function, mapping = relay_parts(template)
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [table_id, "StreamArn"]}
    assert json.loads(mapping["FilterCriteria"]["Filters"][0]["Pattern"]) == FILTER
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert (mapping["MaximumRetryAttempts"], mapping["BatchSize"]) == (10_000, 100)
    dlq = mapping["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    queue = resources(template, "AWS::SQS::Queue")[dlq]["Properties"]
    assert queue == {"MessageRetentionPeriod": 14 * 24 * 3600, "SqsManagedSseEnabled": True}
    topic = stack.resolve(consumer.relay.target_arn)
    assert function["Environment"]["Variables"] == {
        "EMIT_TARGET_ARN": topic,
        "DLQ_URL": {"Ref": dlq},
        "METRICS_NAMESPACE": "IdempotentPipeline",
        "LOG_LEVEL": "INFO",
    }
    consumer_env = env_of_handler(template, "idempotent_runtime.handler.handler")
    assert consumer_env["EMIT_TARGET_ARN"] == topic


def env_of_handler(template, handler):
    (function,) = [
        f["Properties"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == handler
    ]
    return function["Environment"]["Variables"]


def test_the_relays_dead_letter_queue_refuses_plain_http(user_code):
    stack = new_stack()
    emitting_consumer(stack, user_code)
    template = template_of(stack)
    dlq = relay_parts(template)[2]["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    (policy,) = [
        p["Properties"]
        for p in resources(template, "AWS::SQS::QueuePolicy").values()
        if p["Properties"]["Queues"] == [{"Ref": dlq}]
    ]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_the_relays_role_reads_the_stream_publishes_to_the_target_and_sends_to_its_queue_only(user_code):
    stack = new_stack()
    key = kms.Key(stack, "TopicKey")
    consumer = emitting_consumer(stack, user_code, sns.Topic(stack, "Payments", fifo=True, master_key=key))
    template = template_of(stack)
    role = stack.resolve(consumer.relay.role.role_name)
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources(template, "AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [role]
    ]
    granted = {tuple(actions_of(s)): resources_of(s) for s in policy}
    table_id = next(iter(resources(template, "AWS::DynamoDB::Table")))
    topic = stack.resolve(consumer.relay.target_arn)
    assert granted[("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator")] == [
        {"Fn::GetAtt": [table_id, "StreamArn"]}
    ]
    assert granted[("sns:Publish",)] == [topic]
    assert granted[("kms:Decrypt", "kms:GenerateDataKey")] == [stack.resolve(key.key_arn)]
    kms_statement = next(s for s in policy if actions_of(s) == ["kms:Decrypt", "kms:GenerateDataKey"])
    assert "kms:ViaService" in json.dumps(kms_statement["Condition"])
    assert ("sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage") in granted
    # Nothing on the table itself: the relay reads no item.
    assert not any(a.startswith("dynamodb:") and a not in STREAM for s in policy for a in actions_of(s))


STREAM = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}


def test_a_queue_target_is_granted_send_message_and_its_key_through_sqs(user_code):
    stack = new_stack()
    key = kms.Key(stack, "QueueKey")
    target = sqs.Queue(stack, "PaymentsIn", fifo=True, encryption_master_key=key)
    consumer = emitting_consumer(stack, user_code, target)
    statements = policy_statements(template_of(stack))
    queue = stack.resolve(target.queue_arn)
    assert any(actions_of(s) == ["sqs:SendMessage"] and resources_of(s) == [queue] for s in statements)
    assert stack.resolve(consumer.relay.target_arn) == queue


def test_the_relays_alarms_and_metrics(user_code):
    stack = new_stack()
    consumer = emitting_consumer(stack, user_code)
    relay = consumer.relay
    alarms = {k: v for k, v in alarms_of(template_of(stack)).items() if k.startswith("ConsumerRelay")}
    watched = sorted((a["MetricName"], a["Statistic"], a["Threshold"]) for a in alarms.values())
    assert watched == [
        ("ApproximateNumberOfMessagesVisible", "Maximum", 1),
        ("Errors", "Sum", 1),
        ("IteratorAge", "Maximum", 3_600_000),
        ("failed", "Sum", 10),
    ]
    assert relay.alarms == (
        relay.dead_letter_queue_alarm,
        relay.failed_alarm,
        relay.errors_alarm,
        relay.iterator_age_alarm,
    )
    names = [
        relay.metric_published().metric_name,
        relay.metric_dead_lettered().metric_name,
        relay.metric_failed().metric_name,
        relay.metric_reordered().metric_name,
        relay.metric_iterator_age().metric_name,
    ]
    assert names == ["published", "dead_lettered", "failed", "reordered", "IteratorAge"]
    assert relay.metric_published().namespace == "IdempotentPipeline"


def test_emitting_needs_a_mode_that_commits_the_emitted_messages_with_the_effect(user_code):
    with pytest.raises(ConfigurationError) as refused:
        emitting_consumer(new_stack(), user_code, mode="document")
    assert str(refused.value) == (
        "emit_target needs ConsumerOptions.mode 'transaction' or 'guarded', which commit the emitted "
        "messages with the effect; got ConsumerOptions.mode 'document'"
    )


def test_an_imported_table_without_its_stream_is_refused_with_the_fix(user_code):
    stack = new_stack()
    table = IdempotencyTable.from_table(
        stack, "Orders", dynamodb.Table.from_table_name(stack, "Existing", "orders")
    )
    with pytest.raises(ConfigurationError, match="import it with table_stream_arn"):
        emitting_consumer(stack, user_code, table=table)


def test_a_stream_without_new_images_is_refused(user_code):
    stack = new_stack()
    table = IdempotencyTable(stack, "Table")
    table.table.node.default_child.stream_specification = dynamodb.CfnTable.StreamSpecificationProperty(
        stream_view_type="KEYS_ONLY"
    )
    with pytest.raises(ConfigurationError, match="has a KEYS_ONLY stream: make it NEW_IMAGE"):
        OutboxRelay(stack, "Relay", table=table, target=sns.Topic(stack, "T"))


def _zipped(directory: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "asset.zip"
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            for path in sorted(directory.rglob("*")):
                if path.is_file():
                    zf.write(path, path.relative_to(directory).as_posix())
        return archive.stat().st_size


def test_the_relay_ships_its_own_module_the_consumer_the_outbox_and_both_start(user_code, tmp_path):
    import aws_cdk as cdk
    from constructs_helpers import cdk_json_context

    app = cdk.App(context=cdk_json_context(), outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "Assets")
    emitting_consumer(stack, user_code, mode="guarded")
    template = app.synth().get_stack_by_name("Assets").template
    assets = {
        f["Properties"]["Handler"]: tmp_path / "out" / f"asset.{f['Properties']['Code']['S3Key'][:-4]}"
        for f in template["Resources"].values()
        if f["Type"] == "AWS::Lambda::Function" and "S3Key" in f["Properties"].get("Code", {})
    }
    relay, consumer = assets[RELAY_HANDLER], assets["idempotent_runtime.handler.handler"]
    relay_files, consumer_files = files_under(relay), files_under(consumer)
    assert "idempotent_runtime/relay.py" in relay_files and "idempotent_runtime/outbox.py" in relay_files
    never = ("idempotent_runtime/modes/", "idempotent_runtime/flow")
    assert not any(f.startswith(never) for f in relay_files)
    assert "idempotent_runtime/outbox.py" in consumer_files
    assert "idempotent_runtime/relay.py" not in consumer_files
    assert _zipped(relay) < 64 * 1024 and _zipped(consumer) < 64 * 1024
    environment = {
        "EMIT_TARGET_ARN": "arn:aws:sns:us-east-1:123456789012:payments.fifo",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PATH": os.environ.get("PATH", ""),
    }
    started = subprocess.run(
        [sys.executable, "-I", "-S", "-c", "import sys; sys.path.insert(0, ''); import " + RELAY_MODULE],
        cwd=relay,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode == 0, started.stderr


def test_a_pipeline_with_an_emit_target_has_no_cdk_nag_or_cfn_lint_findings(user_code, tmp_path):
    def build(stack):
        payments = sns.Topic(stack, "Payments", fifo=True, enforce_ssl=True)
        _compat.tls_only_topic(
            payments
        )  # aws-cdk-lib up to 2.175 writes the policy only beside another statement
        IdempotentPipeline(
            stack,
            "Pipeline",
            consumer_options=ConsumerOptions(
                mode="transaction", processor="orders:handle", code_directory=str(user_code)
            ),
            emit_target=payments,
        )

    template = synth_with_nag(tmp_path, build)
    assert nag_findings(tmp_path) == []
    assert cfn_lint_findings(template) == []
