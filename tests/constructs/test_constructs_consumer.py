"""IdempotentConsumer: function, code asset, environment (the runtime contract), role, event source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Duration, assertions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs_helpers import (
    actions_of,
    files_under,
    function_asset_dir,
    new_stack,
    only,
    policy_statements,
    resources,
    template_of,
)

from idempotent_pipeline import ConfigurationError, IdempotencyTable, IdempotentConsumer
from idempotent_pipeline.consumer import CONTRACT_VARIABLES, TABLE_ACTIONS, newest_python_runtime

RUNTIME_SOURCE = Path(__file__).resolve().parents[2] / "lambda_src" / "idempotent_runtime"


def fifo_queue(stack: cdk.Stack, id: str = "Queue", **props: Any) -> sqs.Queue:
    props.setdefault("visibility_timeout", Duration.minutes(3))
    return sqs.Queue(stack, id, fifo=True, **props)


def build_consumer(stack: cdk.Stack, **props: Any) -> IdempotentConsumer:
    """A consumer on a new FIFO queue and IdempotencyTable; ``props`` override or add consumer props."""
    table_props = {
        name: props[name]
        for name in ("partition_key_name", "sort_key_name", "time_to_live_attribute")
        if name in props
    }
    if "queue" not in props:
        props["queue"] = fifo_queue(stack)
    if "table" not in props:
        props["table"] = IdempotencyTable(stack, "Table", **table_props).table
    return IdempotentConsumer(stack, "Consumer", **props)


def consumer_template(**props: Any) -> assertions.Template:
    stack = new_stack()
    build_consumer(stack, **props)
    return template_of(stack)


def function_props(template: assertions.Template) -> dict[str, Any]:
    return only(template, "AWS::Lambda::Function")["Properties"]


def environment(template: assertions.Template) -> dict[str, Any]:
    return function_props(template)["Environment"]["Variables"]


def table_actions(template: assertions.Template) -> set[str]:
    found: set[str] = set()
    for statement in policy_statements(template):
        found.update(a for a in actions_of(statement) if a.startswith("dynamodb:"))
    return found


@pytest.fixture(scope="session")
def default_stack() -> cdk.Stack:
    stack = new_stack()
    build_consumer(stack)
    return stack


@pytest.fixture(scope="session")
def default_template(default_stack) -> assertions.Template:
    return template_of(default_stack)


@pytest.fixture(scope="session")
def processor_stack(user_code) -> cdk.Stack:
    stack = new_stack()
    build_consumer(stack, mode="guarded", processor="orders:handle", code_directory=str(user_code))
    return stack


# -- function -------------------------------------------------------------------------------------------


def test_function_runs_the_bundled_handler_on_the_newest_python_runtime(default_template):
    props = function_props(default_template)
    newest = max(
        (r.name for r in lambda_.Runtime.ALL if r.family == lambda_.RuntimeFamily.PYTHON),
        key=lambda name: tuple(int(p) for p in name.removeprefix("python").split(".")),
    )
    assert props["Runtime"] == newest == newest_python_runtime().name
    assert props["Handler"] == "idempotent_runtime.handler.handler"
    assert props["Timeout"] == 30
    assert props["MemorySize"] == 256
    assert props["Architectures"] == ["arm64"]
    assert "ReservedConcurrentExecutions" not in props


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
    assert "MaximumBatchingWindowInSeconds" not in mapping
    assert "ScalingConfig" not in mapping


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
    assert mapping["BatchSize"] == 3
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 5}
    props = function_props(template)
    assert props["ReservedConcurrentExecutions"] == 20
    assert props["MemorySize"] == 1024
    assert props["Timeout"] == 20
    assert props["Architectures"] == ["x86_64"]
    assert only(template, "AWS::Logs::LogGroup")["Properties"]["RetentionInDays"] == 7


def test_reserved_concurrency_below_max_concurrency_warns_of_throttling():
    stack = new_stack()
    build_consumer(stack, max_concurrency=10, reserved_concurrent_executions=5)
    template_of(stack)
    warnings = assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value())
    assert any("throttled" in str(w.entry.data) for w in warnings), warnings


# -- environment: docs/runtime-contract.md ------------------------------------------------------------


def test_default_environment_follows_the_runtime_contract(default_template):
    table_id = next(iter(resources(default_template, "AWS::DynamoDB::Table")))
    assert environment(default_template) == {
        "TABLE_NAME": {"Ref": table_id},
        "PARTITION_KEY": "pk",
        "SORT_KEY": "sk",
        "TTL_ATTRIBUTE": "expires_at",
        "TTL_SECONDS": "604800",
        "IDEMPOTENCY_MODE": "document",
        "KEY_SOURCE": "fields",
        "PARTITION_KEY_FIELD": "x",
        "SORT_KEY_FIELD": "y",
    }


def test_every_option_maps_to_its_contract_variable(user_code):
    stack = new_stack()
    dlq = fifo_queue(stack, "Dlq")
    build_consumer(
        stack,
        partition_key_name="order_id",
        sort_key_name="line_id",
        time_to_live_attribute="ttl",
        mode="guarded",
        processor="orders:handle",
        code_directory=str(user_code),
        ttl=Duration.hours(2),
        lease_duration=Duration.seconds(45),
        dead_letter_queue=dlq,
        max_workers=4,
        metrics_namespace="Orders",
        log_level="DEBUG",
        key_source="fields",
        partition_key_field="order",
        sort_key_field="line",
        environment={"ORDERS_API": "https://example.invalid"},
    )
    template = template_of(stack)
    dlq_id = next(k for k in resources(template, "AWS::SQS::Queue") if k.startswith("Dlq"))
    env = environment(template)
    assert {k: v for k, v in env.items() if k != "TABLE_NAME"} == {
        "PARTITION_KEY": "order_id",
        "SORT_KEY": "line_id",
        "TTL_ATTRIBUTE": "ttl",
        "TTL_SECONDS": "7200",
        "IDEMPOTENCY_MODE": "guarded",
        "KEY_SOURCE": "fields",
        "PARTITION_KEY_FIELD": "order",
        "SORT_KEY_FIELD": "line",
        "PROCESSOR": "orders:handle",
        "DLQ_URL": {"Ref": dlq_id},
        "LEASE_SECONDS": "45",
        "MAX_WORKERS": "4",
        "METRICS_NAMESPACE": "Orders",
        "LOG_LEVEL": "DEBUG",
        "ORDERS_API": "https://example.invalid",
    }


@pytest.mark.parametrize("key_source", ["dedup_id", "message_id", "body_sha256"])
def test_non_field_key_sources_set_no_field_variables(key_source):
    env = environment(consumer_template(key_source=key_source))
    assert env["KEY_SOURCE"] == key_source
    assert "PARTITION_KEY_FIELD" not in env and "SORT_KEY_FIELD" not in env


def test_environment_is_accepted_by_the_runtime_configuration(user_code):
    """The variables the construct sets parse in the runtime (tokens replaced by deploy-time values)."""
    config_module = pytest.importorskip("idempotent_runtime.config")
    stack = new_stack()
    build_consumer(
        stack,
        mode="transaction",
        processor="orders:handle",
        code_directory=str(user_code),
        dead_letter_queue=fifo_queue(stack, "Dlq"),
        ttl=Duration.days(1),
        max_workers=8,
    )
    deployed = {
        name: ("https://sqs.eu-west-1.amazonaws.com/111122223333/dlq.fifo" if name == "DLQ_URL" else "orders")
        if isinstance(value, dict)
        else value
        for name, value in environment(template_of(stack)).items()
    }
    config = config_module.Config.from_env(deployed)
    assert (config.table_name, config.mode, config.processor) == ("orders", "transaction", "orders:handle")
    assert (config.ttl_seconds, config.max_workers) == (86400, 8)
    assert config.dlq_url.endswith("dlq.fifo")


# -- permissions: exactly the runtime's actions per mode ------------------------------------------------


@pytest.mark.parametrize("mode", ["document", "transaction", "guarded"])
def test_table_permissions_are_exactly_the_runtime_actions_of_the_mode(mode, user_code):
    processor = {} if mode == "document" else {"processor": "orders:handle", "code_directory": str(user_code)}
    template = consumer_template(mode=mode, **processor)
    assert table_actions(template) == set(TABLE_ACTIONS[mode])
    for statement in policy_statements(template):
        assert not any(a.endswith("*") for a in actions_of(statement) if a.startswith("dynamodb:")), statement


def test_contract_table_actions_per_mode():
    assert TABLE_ACTIONS == {
        "document": ("dynamodb:PutItem",),
        "guarded": ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
        "transaction": (
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:ConditionCheckItem",
        ),
    }


def test_table_permissions_name_only_the_table(default_template):
    table_id = next(iter(resources(default_template, "AWS::DynamoDB::Table")))
    statements = [s for s in policy_statements(default_template) if "dynamodb:PutItem" in actions_of(s)]
    resources_named = [
        r for s in statements for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    ]
    assert resources_named == [{"Fn::GetAtt": [table_id, "Arn"]}]


def test_queue_permissions_are_the_event_source_consume_actions(default_template):
    queue_id = next(iter(resources(default_template, "AWS::SQS::Queue")))
    sqs_statements = [s for s in policy_statements(default_template) if actions_of(s)[0].startswith("sqs:")]
    assert [(sorted(actions_of(s)), s["Effect"], s["Resource"]) for s in sqs_statements] == [
        (
            [
                "sqs:ChangeMessageVisibility",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
                "sqs:GetQueueUrl",
                "sqs:ReceiveMessage",
            ],
            "Allow",
            {"Fn::GetAtt": [queue_id, "Arn"]},
        )
    ]


def test_no_dlq_means_no_dlq_url_and_no_send_message(default_template):
    assert "DLQ_URL" not in environment(default_template)
    assert not [s for s in policy_statements(default_template) if "sqs:SendMessage" in actions_of(s)]


def test_dlq_gets_send_message_only():
    stack = new_stack()
    dlq = fifo_queue(stack, "Dlq")
    build_consumer(stack, dead_letter_queue=dlq)
    template = template_of(stack)
    dlq_id = next(k for k in resources(template, "AWS::SQS::Queue") if k.startswith("Dlq"))
    sends = [s for s in policy_statements(template) if "sqs:SendMessage" in actions_of(s)]
    assert sends == [
        {"Action": "sqs:SendMessage", "Effect": "Allow", "Resource": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    ]
    assert not [s for s in policy_statements(template) if actions_of(s)[0].startswith("kms:")]


def test_dlq_with_customer_managed_key_adds_generate_data_key_and_decrypt():
    stack = new_stack()
    dlq_key = kms.Key(stack, "DlqKey")
    dlq = fifo_queue(stack, "Dlq", encryption=sqs.QueueEncryption.KMS, encryption_master_key=dlq_key)
    build_consumer(stack, dead_letter_queue=dlq)
    template = template_of(stack)
    key_id = next(k for k in resources(template, "AWS::KMS::Key") if k.startswith("DlqKey"))
    key_statements = [
        s for s in policy_statements(template) if s["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
    ]
    assert [sorted(actions_of(s)) for s in key_statements] == [["kms:Decrypt", "kms:GenerateDataKey"]]


def test_table_with_customer_managed_key_grants_the_key_actions_dynamodb_needs():
    stack = new_stack()
    key = kms.Key(stack, "TableKey")
    table = IdempotencyTable(stack, "Table", encryption_key=key).table
    build_consumer(stack, table=table)
    template = template_of(stack)
    key_id = next(k for k in resources(template, "AWS::KMS::Key") if k.startswith("TableKey"))
    key_statements = [
        s for s in policy_statements(template) if s["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
    ]
    assert [sorted(actions_of(s)) for s in key_statements] == [
        ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"]
    ]


def test_imported_table_is_granted_by_arn():
    stack = new_stack()
    table = dynamodb.Table.from_table_name(stack, "Existing", "orders")
    build_consumer(stack, table=table)
    template = template_of(stack)
    assert environment(template)["TABLE_NAME"] == "orders"
    assert table_actions(template) == {"dynamodb:PutItem"}


# -- code asset ---------------------------------------------------------------------------------------


def test_code_asset_contains_the_runtime_package(default_stack):
    asset = function_asset_dir(default_stack)
    expected = {
        f"idempotent_runtime/{p.relative_to(RUNTIME_SOURCE).as_posix()}"
        for p in RUNTIME_SOURCE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert {"idempotent_runtime/__init__.py", "idempotent_runtime/handler.py"} <= expected
    assert files_under(asset) == expected


def test_code_asset_places_user_code_beside_the_runtime_without_bytecode(processor_stack, user_code):
    files = files_under(function_asset_dir(processor_stack))
    assert {"orders.py", "helpers/__init__.py", "idempotent_runtime/handler.py"} <= files
    assert not [f for f in files if f.endswith(".pyc") or "__pycache__" in f]


def test_code_asset_is_the_same_for_the_same_code():
    """Staging copies into a fresh directory each time; the asset hash depends on content only."""
    keys = []
    for name in ("One", "Two"):
        stack = new_stack(name)
        build_consumer(stack)
        keys.append(function_props(template_of(stack))["Code"]["S3Key"])
    assert keys[0] == keys[1]


def test_processor_module_may_be_a_package_module(tmp_path):
    (tmp_path / "shop" / "orders").mkdir(parents=True)
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "orders" / "__init__.py").write_text("def handle(message, table):\n    pass\n")
    template = consumer_template(
        mode="transaction", processor="shop.orders:handle", code_directory=str(tmp_path)
    )
    assert environment(template)["PROCESSOR"] == "shop.orders:handle"


def test_document_mode_may_run_a_processor(user_code):
    env = environment(consumer_template(processor="orders:handle", code_directory=str(user_code)))
    assert (env["IDEMPOTENCY_MODE"], env["PROCESSOR"]) == ("document", "orders:handle")


# -- validation ---------------------------------------------------------------------------------------


def _rejects(pattern: str, **props: Any) -> None:
    with pytest.raises(ConfigurationError, match=pattern):
        build_consumer(new_stack(), **props)


def test_standard_queue_is_rejected():
    stack = new_stack()
    queue = sqs.Queue(stack, "Standard", visibility_timeout=Duration.minutes(3))
    with pytest.raises(
        ConfigurationError, match=r"queue must be a FIFO queue .* got a standard queue: TestStack/"
    ):
        build_consumer(stack, queue=queue)


def test_standard_dead_letter_queue_is_rejected():
    stack = new_stack()
    dlq = sqs.Queue.from_queue_arn(stack, "Dlq", "arn:aws:sqs:eu-west-1:111122223333:failures")
    with pytest.raises(
        ConfigurationError, match=r"dead_letter_queue must be a FIFO queue .* got a standard queue"
    ):
        build_consumer(stack, dead_letter_queue=dlq)


@pytest.mark.parametrize("batch_size", [0, 11])
def test_batch_size_outside_one_to_ten_is_rejected(batch_size):
    _rejects(rf"batch_size must be between 1 and 10; got {batch_size}$", batch_size=batch_size)


def test_ttl_of_zero_is_rejected():
    _rejects(r"ttl must be greater than 0 seconds; got 0 seconds", ttl=Duration.seconds(0))


def test_visibility_timeout_below_six_times_the_function_timeout_is_rejected():
    stack = new_stack()
    queue = fifo_queue(stack, visibility_timeout=Duration.seconds(179))
    with pytest.raises(
        ConfigurationError,
        match=r"visibility_timeout of queue TestStack/Queue must be at least 6 x the function timeout "
        r"\(30 seconds\) = 180 seconds; got 179 seconds",
    ):
        build_consumer(stack, queue=queue)


def test_queue_with_default_visibility_timeout_is_rejected():
    stack = new_stack()
    queue = sqs.Queue(stack, "Queue", fifo=True)
    with pytest.raises(ConfigurationError, match=r"= 60 seconds; got 30 seconds"):
        build_consumer(stack, queue=queue, timeout=Duration.seconds(10))


def test_imported_queue_visibility_timeout_is_not_checked():
    stack = new_stack()
    queue = sqs.Queue.from_queue_arn(stack, "Imported", "arn:aws:sqs:eu-west-1:111122223333:orders.fifo")
    build_consumer(stack, queue=queue)
    assert only(template_of(stack), "AWS::Lambda::EventSourceMapping")["Properties"]["EventSourceArn"] == (
        "arn:aws:sqs:eu-west-1:111122223333:orders.fifo"
    )


def test_unresolved_tokens_are_not_checked():
    stack = new_stack()
    ttl = cdk.CfnParameter(stack, "TtlSeconds", type="Number")
    build_consumer(stack, ttl=Duration.seconds(ttl.value_as_number))
    assert environment(template_of(stack))["TTL_SECONDS"] == {"Ref": "TtlSeconds"}


def test_unresolved_integer_props_are_not_checked():
    stack = new_stack()
    batch = cdk.CfnParameter(stack, "BatchSize", type="Number").value_as_number
    memory = cdk.CfnParameter(stack, "MemorySize", type="Number").value_as_number
    build_consumer(stack, batch_size=batch, memory_size=memory)
    template = template_of(stack)
    assert function_props(template)["MemorySize"] == {"Ref": "MemorySize"}
    (mapping,) = resources(template, "AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["BatchSize"] == {"Ref": "BatchSize"}


@pytest.mark.parametrize(
    ("props", "pattern"),
    [
        (
            {"partition_key_name": "id", "sort_key_name": "id"},
            r"partition_key_name and sort_key_name must differ; ",
        ),
        ({"partition_key_name": ""}, r"partition_key_name must be a non-empty attribute name; got ''"),
        ({"sort_key_name": "  "}, r"sort_key_name must be a non-empty attribute name; got '  '"),
        ({"mode": "exactly-once"}, r"mode must be one of document, transaction, guarded; got 'exactly-once'"),
        (
            {"key_source": "body"},
            r"key_source must be one of fields, dedup_id, message_id, body_sha256; got 'body'",
        ),
        (
            {"partition_key_field": "a", "sort_key_field": "a"},
            r"partition_key_field and sort_key_field must differ",
        ),
        ({"partition_key_field": ""}, r"partition_key_field must be a non-empty attribute name; got ''"),
        (
            {"key_source": "dedup_id", "partition_key_field": "a"},
            r"partition_key_field and sort_key_field apply only to key_source 'fields'; "
            r"got key_source 'dedup_id'",
        ),
        ({"mode": "guarded"}, r"mode 'guarded' runs your processing code: set processor"),
        ({"mode": "transaction"}, r"mode 'transaction' runs your processing code: set processor"),
        (
            {"lease_duration": Duration.seconds(30)},
            r"lease_duration applies only to mode 'guarded'; got mode 'document'",
        ),
        ({"timeout": Duration.seconds(901)}, r"timeout must be between 1 and 900 seconds; got 901 seconds"),
        ({"memory_size": 64}, r"memory_size must be between 128 and 10240; got 64"),
        ({"max_concurrency": 1}, r"max_concurrency must be between 2 and 1000; got 1"),
        ({"reserved_concurrent_executions": 0}, r"reserved_concurrent_executions must be at least 1; got 0"),
        ({"max_workers": 65}, r"max_workers must be between 1 and 64; got 65"),
        ({"batch_size": 2.5}, r"batch_size must be an integer; got 2.5"),
        ({"log_level": "TRACE"}, r"log_level must be one of DEBUG, INFO, WARNING, ERROR; got 'TRACE'"),
        (
            {"metrics_namespace": "a:b"},
            r"metrics_namespace must be 1 to 255 characters without ':'.*got 'a:b'",
        ),
        (
            {"environment": {"TABLE_NAME": "x", "LOG_LEVEL": "DEBUG"}},
            r"environment may not set the runtime's own variables \(use the matching props\); got LOG_LEVEL, "
            r"TABLE_NAME",
        ),
        (
            {"time_to_live_attribute": "pk"},
            r"time_to_live_attribute must differ from the key attributes; got 'pk'",
        ),
    ],
)
def test_invalid_props_are_rejected_naming_prop_and_value(props, pattern):
    stack = new_stack()
    table = dynamodb.Table.from_table_name(stack, "Existing", "orders")
    with pytest.raises(ConfigurationError, match=pattern):
        build_consumer(stack, table=table, **props)


def test_lease_of_zero_is_rejected(user_code):
    _rejects(
        r"lease_duration must be greater than 0 seconds; got 0 seconds",
        mode="guarded",
        processor="orders:handle",
        code_directory=str(user_code),
        lease_duration=Duration.seconds(0),
    )


def test_key_names_must_match_the_tables_keys():
    stack = new_stack()
    table = IdempotencyTable(stack, "Table", partition_key_name="order_id").table
    with pytest.raises(
        ConfigurationError,
        match=r"partition_key_name must match the table's key attribute 'order_id'; got 'pk'",
    ):
        build_consumer(stack, table=table)


def test_table_without_sort_key_is_rejected():
    stack = new_stack()
    table = dynamodb.Table(
        stack, "Plain", partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    )
    with pytest.raises(
        ConfigurationError,
        match=r"table must have one string partition key and one string sort key; .* has 0 sort key",
    ):
        build_consumer(stack, table=table)


def test_table_with_number_key_is_rejected():
    stack = new_stack()
    table = dynamodb.Table(
        stack,
        "Numbers",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.NUMBER),
        sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
    )
    with pytest.raises(ConfigurationError, match=r"table key 'pk' must be of type string; got NUMBER"):
        build_consumer(stack, table=table)


def test_processor_must_look_like_module_colon_function(user_code):
    _rejects(
        r"processor must look like 'module:function' \(e.g. 'orders:handle'\); got 'orders.handle'",
        processor="orders.handle",
        code_directory=str(user_code),
    )


def test_processor_needs_code_directory():
    _rejects(
        r"processor 'orders:handle' needs code_directory: the directory holding module 'orders'",
        processor="orders:handle",
    )


def test_code_directory_needs_processor(user_code):
    _rejects(rf"code_directory is set \('{user_code}'\) but processor is not", code_directory=str(user_code))


def test_code_directory_must_exist(tmp_path):
    missing = tmp_path / "missing"
    _rejects(
        rf"code_directory must be an existing directory; got '{missing}'",
        processor="orders:handle",
        code_directory=str(missing),
    )


def test_code_directory_must_not_shadow_the_runtime(tmp_path):
    (tmp_path / "idempotent_runtime").mkdir()
    (tmp_path / "orders.py").write_text("def handle(message, table):\n    pass\n")
    _rejects(
        rf"code_directory must not contain 'idempotent_runtime': it would shadow the bundled runtime; "
        rf"got '{tmp_path}'",
        processor="orders:handle",
        code_directory=str(tmp_path),
    )


def test_processor_module_must_be_in_code_directory(tmp_path):
    _rejects(
        rf"processor module 'billing' is not in code_directory '{tmp_path}' \(looked for billing.py and "
        r"billing/__init__.py\)",
        processor="billing:handle",
        code_directory=str(tmp_path),
    )


def test_processor_may_not_be_the_runtime_itself(user_code):
    _rejects(
        r"processor must name a module of your own code; got 'idempotent_runtime.handler:handler'",
        processor="idempotent_runtime.handler:handler",
        code_directory=str(user_code),
    )


def test_contract_variables_match_the_documented_table():
    contract = (Path(__file__).resolve().parents[2] / "docs" / "runtime-contract.md").read_text()
    documented = {
        line.split("|")[1].strip().strip("`")
        for line in contract.splitlines()
        if line.startswith("| `") and line.split("|")[1].strip().strip("`").isupper()
    }
    assert documented == CONTRACT_VARIABLES


def test_missing_runtime_package_is_reported(monkeypatch):
    import idempotent_pipeline._asset as asset

    monkeypatch.setattr(asset.importlib.util, "find_spec", lambda name: None)
    _rejects(r"the idempotent_runtime package is not importable; install idempotent-pipeline")
