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
from aws_cdk import RemovalPolicy
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
    MessagingOptions,
    OutboxRelay,
    TableOptions,
    _compat,
)

RELAY_MODULE = "idempotent_runtime.relay"
RELAY_HANDLER = RELAY_MODULE + ".handler"
# Writes of the items of the prefix's outbox that carry its emitter; and of 0.3's items (sort key
# "idempotency#outbox", no token: not a marker), for the records left in the stream at the upgrade.
FILTERS = [
    {
        "eventName": ["INSERT", "MODIFY"],
        "dynamodb": {
            "Keys": {
                "pk": {"S": [{"prefix": "shop#idempotency#outbox#"}]},
                "sk": {"S": [{"prefix": "idempotency#outbox#"}]},
            },
            "NewImage": {"idempotency:emitter": {"S": ["shop#idempotency#outbox#"]}},
        },
    },
    {
        "eventName": ["INSERT", "MODIFY"],
        "dynamodb": {
            "Keys": {
                "pk": {"S": [{"prefix": "shop#idempotency#outbox#"}]},
                "sk": {"S": ["idempotency#outbox"]},
            },
            "NewImage": {"idempotency:token": {"S": [{"exists": False}]}},
        },
    },
]


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
    assert [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]] == FILTERS
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
        "TABLE_NAME": {"Ref": table_id},  # where the outbox is, for operators' tools
        "KEY_PREFIX": "shop#",
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
    # The relay's dead letters and Lambda's on-failure destination: SendMessage on its own queue only.
    dlq = stack.resolve(consumer.relay.dead_letter_queue.queue_arn)
    assert [s for s in policy if any(a.startswith("sqs:") for a in actions_of(s))] == [
        {"Action": "sqs:SendMessage", "Effect": "Allow", "Resource": dlq}
    ]
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
    granted = {(a, json.dumps(r)) for s in statements for a in actions_of(s) for r in resources_of(s)}
    assert ("sqs:SendMessage", json.dumps(queue)) in granted
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


@pytest.mark.parametrize("keyed", [False, True])
def test_a_pipeline_with_an_emit_target_has_no_cdk_nag_or_cfn_lint_findings(user_code, tmp_path, keyed):
    def build(stack):
        key = kms.Key(stack, "Key", enable_key_rotation=True) if keyed else None
        payments = sns.Topic(stack, "Payments", fifo=True, enforce_ssl=True, master_key=key)
        _compat.tls_only_topic(
            payments
        )  # aws-cdk-lib up to 2.175 writes the policy only beside another statement
        IdempotentPipeline(
            stack,
            "Pipeline",
            consumer_options=ConsumerOptions(
                mode="transaction", processor="orders:handle", code_directory=str(user_code)
            ),
            table_options=TableOptions(encryption_key=key),
            emit_target=payments,
        )

    template = synth_with_nag(tmp_path, build)
    assert nag_findings(tmp_path) == []
    assert cfn_lint_findings(template) == []


# -- the relay's dead-letter queue is kept and protected like the pipeline's ---------------------------------


def _relay_dlq(template):
    dlq = relay_parts(template)[2]["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    return dlq, resources(template, "AWS::SQS::Queue")[dlq]


@pytest.mark.parametrize(
    ("options", "policy"),
    [
        (MessagingOptions(), "Retain"),  # the default of MessagingOptions.dead_letter_removal_policy
        (MessagingOptions(dead_letter_removal_policy=RemovalPolicy.DESTROY), "Delete"),
    ],
)
def test_the_relays_dead_letter_queue_is_kept_as_the_pipelines_dead_letter_queues_are(
    user_code, options, policy
):
    stack = new_stack()
    pipeline = IdempotentPipeline(
        stack,
        "Pipeline",
        messaging_options=options,
        consumer_options=ConsumerOptions(
            mode="transaction", processor="orders:handle", code_directory=str(user_code)
        ),
        emit_target=sns.Topic(stack, "Payments", fifo=True),
    )
    template = template_of(stack)
    _, queue = _relay_dlq(template)
    pipeline_dlq = resources(template, "AWS::SQS::Queue")[
        stack.get_logical_id(pipeline.dead_letter_queue.node.default_child)
    ]
    assert (queue["DeletionPolicy"], queue["UpdateReplacePolicy"]) == (policy, policy)
    assert pipeline_dlq["DeletionPolicy"] == policy


@pytest.mark.parametrize("keyed", ["table", "target"])
def test_the_relays_dead_letter_queue_is_encrypted_with_the_customers_key_and_the_relay_may_use_it(
    user_code, keyed
):
    stack = new_stack()
    key = kms.Key(stack, "CustomerKey")
    table = IdempotencyTable(
        stack, "Table", options=TableOptions(encryption_key=key if keyed == "table" else None)
    )
    target = sqs.Queue(
        stack, "PaymentsIn", fifo=True, encryption_master_key=key if keyed == "target" else None
    )
    consumer = emitting_consumer(stack, user_code, target, table=table)
    template = template_of(stack)
    _, queue = _relay_dlq(template)
    assert queue["Properties"]["KmsMasterKeyId"] == stack.resolve(key.key_arn)
    role = stack.resolve(consumer.relay.role.role_name)
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources(template, "AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [role]
    ]
    through_sqs = [
        s
        for s in policy
        if resources_of(s) == [stack.resolve(key.key_arn)] and "sqs." in json.dumps(s.get("Condition"))
    ]
    # SendMessage to a KMS-encrypted queue: the relay's own dead letters and Lambda's on-failure destination,
    # both with the function's role, through SQS only.
    assert [actions_of(s) for s in through_sqs] == [["kms:Decrypt", "kms:GenerateDataKey"]]


def test_each_relay_on_a_shared_table_is_invoked_only_for_its_own_consumers_outbox(user_code, monkeypatch):
    """Orders ("shop") and returns ("", a prefix of "shop") share one table. Returns keys messages
    ("shopidempotency#outbox#o-1", "outbox#1") and ("shopidempotency#outbox#o-2", "outbox"): their markers
    fall inside the partitions and sort keys of orders' outbox (0.4's and 0.3's). Each relay's synthesized
    filter, applied by the local cloud's event filter to the table's real stream, passes its own outbox
    items and nothing else - and a 0.3 outbox item of orders still in the stream reaches orders' relay."""
    pytest.importorskip("moto", reason="the runtime's writes come from moto, in the newest environment")
    stack = new_stack()
    table = IdempotencyTable(stack, "Shared")
    topic = sns.Topic(stack, "Payments", fifo=True)
    for name, prefix in (("Orders", "shop"), ("Returns", "")):
        IdempotentConsumer(
            stack,
            name,
            queue=Messaging(stack, name + "Messaging").queue,
            table=table,
            options=ConsumerOptions(
                mode="transaction",
                key_prefix=prefix,
                processor="orders:handle",
                code_directory=str(user_code),
            ),
            emit_target=topic,
        )
    template = template_of(stack)
    filters = {}
    for name, function in resources(template, "AWS::Lambda::Function").items():
        if function["Properties"]["Handler"] == RELAY_HANDLER:
            (mapping,) = [
                m["Properties"]
                for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
                if m["Properties"]["FunctionName"] == {"Ref": name}
            ]
            prefix = "shop" if name.startswith("OrdersRelay") else ""
            filters[prefix] = [f["Pattern"] for f in mapping["FilterCriteria"]["Filters"]]
    assert set(filters) == {"shop", ""}

    records = _shared_table_stream(monkeypatch)
    from idempotent_local.event_filter import matches

    keys = [(r["dynamodb"]["Keys"]["pk"]["S"], r["dynamodb"]["Keys"]["sk"]["S"]) for r in records]

    def reaching(prefix):
        return sorted(key for key, r in zip(keys, records, strict=True) if matches(filters[prefix], r))

    orders, returns = reaching("shop"), reaching("")
    assert orders == [
        ("shopidempotency#outbox#o-1", "idempotency#outbox"),  # 0.3's item, left in the stream at the upgrade
        ("shopidempotency#outbox#o-1", "idempotency#outbox#1800000000000#shopo-1#1"),
    ]
    assert [pk for pk, _ in returns] == [
        "idempotency#outbox#o-1",
        "idempotency#outbox#o-2",
        "idempotency#outbox#r-1",
    ]
    crafted = [  # returns' markers of the crafted keys
        ("shopidempotency#outbox#o-1", "idempotency#outbox#1"),
        ("shopidempotency#outbox#o-2", "idempotency#outbox"),
    ]
    assert all(key in keys and key not in orders + returns for key in crafted)


def _shared_table_stream(monkeypatch):
    """Every record of the shared table's stream, as Lambda hands them out: orders and returns commit in
    transaction mode (moto in-process), each emitting, returns also for the crafted key; plus a 0.3 item."""
    import base64
    import datetime

    import boto3
    from idempotent_runtime.config import Config
    from idempotent_runtime.flow import build_handler
    from moto import mock_aws
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    for name, value in (
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "t"),
        ("AWS_SECRET_ACCESS_KEY", "t"),
    ):
        monkeypatch.setenv(name, value)

    def emit(message):
        message.emit(
            {"for": message.json_object()["x"]}, group_id=message.json_object()["x"].split("#")[-1][:3]
        )
        return []

    def wire(value):
        if isinstance(value, bytes):
            return base64.b64encode(value).decode()
        if isinstance(value, datetime.datetime):
            return value.timestamp()
        if isinstance(value, dict):
            return {k: wire(v) for k, v in value.items()}
        return [wire(v) for v in value] if isinstance(value, list) else value

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="shared",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )
        target = "arn:aws:sns:us-east-1:123456789012:payments.fifo"
        crafted = [("shopidempotency#outbox#o-1", "outbox#1"), ("shopidempotency#outbox#o-2", "outbox")]
        for prefix, keys in (("shop", [("o-1", "1")]), ("", [("r-1", "1"), *crafted])):
            config = Config(
                table_name="shared", mode="transaction", key_prefix=prefix, emit_target_arn=target
            )
            handler = build_handler(
                config, dynamodb_client=dynamodb, processor=emit, clock=lambda: 1_800_000_000.0
            )
            for x, y in keys:
                body = json.dumps({"x": x, "y": y})
                record = {
                    "messageId": f"{prefix}-{x}",
                    "body": body,
                    "attributes": {
                        "ApproximateReceiveCount": "1",
                        "MessageGroupId": "g",
                        "MessageDeduplicationId": x[:8],
                    },
                    "messageAttributes": {},
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:in.fifo",
                }
                assert handler({"Records": [record]}, None) == {"batchItemFailures": []}
        legacy = {  # what 0.3's emit() wrote for orders before the upgrade
            "pk": {"S": "shopidempotency#outbox#o-1"},
            "sk": {"S": "idempotency#outbox"},
            "idempotency:messages": {"L": [{"M": {"body": {"S": "{}"}, "dedup_id": {"S": "o-0#1#000"}}}]},
            "idempotency:group": {"S": "o-1"},
            "idempotency:message_id": {"S": "before-the-upgrade"},
        }
        dynamodb.put_item(TableName="shared", Item=legacy)
        arn = dynamodb.describe_table(TableName="shared")["Table"]["LatestStreamArn"]
        backend = dynamodbstreams_backends["123456789012"]["us-east-1"]
        shard = backend.describe_stream(arn)["Shards"][0]["ShardId"]
        iterator = backend.get_shard_iterator(arn, shard, "TRIM_HORIZON", None)
        return [json.loads(json.dumps(wire(r))) for r in backend.get_records(iterator.arn, 10_000)["Records"]]
