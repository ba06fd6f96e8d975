"""The options types: declared and documented once, defaults from the contract, wrong types named, tokens
skipped by every rule."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Duration
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs_helpers import REPO, env_of, new_stack, only, template_of, warnings_of
from idempotent_runtime import contract
from idempotent_runtime.contract import KeySource, Mode, OnConflict

import idempotent_pipeline
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
    _alarms,
    _rules,
    consumer,
    messaging,
    table,
)

OPTIONS = (MessagingOptions, TableOptions, ConsumerOptions, AlarmOptions)


def test_configuration_error_is_the_contracts_class_importable_from_the_package():
    assert idempotent_pipeline.ConfigurationError is contract.ConfigurationError
    assert issubclass(ConfigurationError, ValueError)


def test_every_public_name_is_importable():
    for name in idempotent_pipeline.__all__:
        assert getattr(idempotent_pipeline, name) is not None, name


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: o.__name__)
def test_options_are_frozen_keyword_only_dataclasses(options):
    instance = options()
    assert dataclasses.is_dataclass(instance)
    with pytest.raises(dataclasses.FrozenInstanceError):
        instance.__setattr__(dataclasses.fields(instance)[0].name, None)
    with pytest.raises(TypeError):
        options(True)  # positional: refused


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: o.__name__)
def test_every_option_is_documented_once_with_its_default(options):
    """Each field is followed by its docstring, and the docstring names the default."""
    source = (REPO / "idempotent_pipeline" / "options.py").read_text()
    (cls,) = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == options.__name__]
    documented = {}
    for field, after in zip(cls.body, cls.body[1:], strict=False):
        if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name):
            assert isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant), field.target.id
            documented[field.target.id] = after.value.value
    assert set(documented) == {f.name for f in dataclasses.fields(options)}
    for name, doc in documented.items():
        assert "Default" in doc, f"{options.__name__}.{name} does not state its default"


def test_defaults_come_from_the_contract():
    assert (
        TableOptions().partition_key_name,
        TableOptions().sort_key_name,
        TableOptions().time_to_live_attribute,
    ) == (contract.PARTITION_KEY.default, contract.SORT_KEY.default, contract.TTL_ATTRIBUTE.default)
    defaults = ConsumerOptions()
    assert defaults.mode == Mode.DOCUMENT and defaults.key_source == KeySource.FIELDS
    assert defaults.on_conflict == OnConflict.QUARANTINE
    assert defaults.metrics_namespace == contract.METRICS_NAMESPACE.default
    assert _rules.seconds("t", defaults.dedup_ttl) == contract.DEDUP_TTL_SECONDS.default
    assert _rules.seconds("t", defaults.lease_margin) == contract.LEASE_MARGIN_SECONDS.default
    assert defaults.document_ttl is None  # documents never expire unless asked


def test_no_second_literal_of_a_contract_name_in_the_constructs():
    """Variable names and defaults are read from the contract module, never written again."""
    literals = {variable.name for variable in contract.ENVIRONMENT} | {"TTL_SECONDS", "604800"}
    for path in (REPO / "idempotent_pipeline").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in literals, f"{path.name}: {node.value!r}"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(Mode.GUARDED, "guarded"), ("guarded", "guarded")],
)
def test_closed_sets_accept_the_enum_or_its_value(value, expected, user_code):
    stack = new_stack()
    IdempotentPipeline(
        stack,
        "Pipeline",
        consumer_options=ConsumerOptions(
            mode=value,
            on_conflict=OnConflict.DUPLICATE if value is Mode.GUARDED else "duplicate",
            processor="orders:handle",
            code_directory=str(user_code),
        ),
    )
    env = env_of(template_of(stack))
    assert (env["IDEMPOTENCY_MODE"], env["ON_CONFLICT"]) == (expected, "duplicate")


def _build(**options: Any) -> None:
    """A pipeline whose options come from ``options`` as block__prop=value."""
    blocks: dict[str, dict[str, Any]] = {"messaging": {}, "table": {}, "consumer": {}, "alarm": {}}
    for key, value in options.items():
        block, prop = key.split("__")
        blocks[block][prop] = value
    IdempotentPipeline(
        new_stack(),
        "Pipeline",
        messaging_options=MessagingOptions(**blocks["messaging"]),
        table_options=TableOptions(**blocks["table"]),
        consumer_options=ConsumerOptions(**blocks["consumer"]),
        alarm_options=AlarmOptions(**blocks["alarm"]),
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"consumer__timeout": "30"},
            "ConsumerOptions.timeout must be an aws_cdk.Duration (e.g. Duration.seconds(30)); got '30'",
        ),
        (
            {"consumer__dedup_ttl": 86400},
            "ConsumerOptions.dedup_ttl must be an aws_cdk.Duration (e.g. Duration.seconds(30)); got 86400",
        ),
        (
            {"messaging__retention_period": "4 days"},
            "MessagingOptions.retention_period must be an aws_cdk.Duration (e.g. Duration.seconds(30)); "
            "got '4 days'",
        ),
        (
            {"alarm__max_message_age": 600},
            "AlarmOptions.max_message_age must be an aws_cdk.Duration (e.g. Duration.seconds(30)); got 600",
        ),
        ({"consumer__batch_size": "5"}, "ConsumerOptions.batch_size must be an integer; got '5'"),
        ({"consumer__batch_size": True}, "ConsumerOptions.batch_size must be an integer; got True"),
        ({"consumer__memory_size": 2.5}, "ConsumerOptions.memory_size must be an integer; got 2.5"),
        ({"messaging__fifo": "false"}, "MessagingOptions.fifo must be True or False; got 'false'"),
        ({"table__partition_key_name": 7}, "TableOptions.partition_key_name must be a string; got 7"),
        (
            {"consumer__fingerprint_fields": "order.id"},
            "ConsumerOptions.fingerprint_fields must be a list of field paths; got 'order.id'",
        ),
        (
            {"consumer__mode": "exactly-once"},
            "ConsumerOptions.mode must be one of document, transaction, guarded, versioned; "
            "got 'exactly-once'",
        ),
        (
            {"consumer__key_source": "body"},
            "ConsumerOptions.key_source must be one of fields, dedup_id, message_id, body_sha256, field; "
            "got 'body'",
        ),
        (
            {"consumer__on_conflict": "ignore"},
            "ConsumerOptions.on_conflict must be one of quarantine, duplicate; got 'ignore'",
        ),
        (
            {"consumer__log_level": "TRACE"},
            "ConsumerOptions.log_level must be one of DEBUG, INFO, WARNING, ERROR; got 'TRACE'",
        ),
        (
            {"alarm__alarm_topic": "arn:aws:sns:eu-west-1:111122223333:oncall"},
            "AlarmOptions.alarm_topic must be an sns.ITopic; got 'arn:aws:sns:eu-west-1:111122223333:oncall'",
        ),
        # bool("false") is True: a string must not switch protection, backups or alarms on (or off).
        (
            {"table__deletion_protection": "false"},
            "TableOptions.deletion_protection must be True or False; got 'false'",
        ),
        (
            {"table__point_in_time_recovery": "false"},
            "TableOptions.point_in_time_recovery must be True or False; got 'false'",
        ),
        ({"alarm__enabled": "false"}, "AlarmOptions.enabled must be True or False; got 'false'"),
        (
            {"consumer__log_retention": 30},
            "ConsumerOptions.log_retention must be a logs.RetentionDays (e.g. RetentionDays.ONE_MONTH); "
            "got 30",
        ),
        (
            {"consumer__tracing": "Active"},
            "ConsumerOptions.tracing must be a lambda_.Tracing (e.g. Tracing.ACTIVE); got 'Active'",
        ),
        (
            {"consumer__architecture": "arm64"},
            "ConsumerOptions.architecture must be a lambda_.Architecture (Architecture.ARM_64 or "
            "Architecture.X86_64); got 'arm64'",
        ),
        (
            {"consumer__layers": "arn:aws:lambda:eu-west-1:111122223333:layer:shared:3"},
            "ConsumerOptions.layers must be a list of lambda_.ILayerVersion; got "
            "'arn:aws:lambda:eu-west-1:111122223333:layer:shared:3'",
        ),
        ({"consumer__vpc": "vpc-1"}, "ConsumerOptions.vpc must be an ec2.IVpc; got 'vpc-1'"),
        (
            {"consumer__security_groups": ["sg-1"]},
            "ConsumerOptions.security_groups must be a list of ec2.ISecurityGroup; got ['sg-1']",
        ),
        (
            {"consumer__environment": {"RATE": 5}},
            "ConsumerOptions.environment must map names to strings; got {'RATE': 5}",
        ),
        (
            {"messaging__filter_policy": ["order"]},
            "MessagingOptions.filter_policy must be a mapping of names to sns.SubscriptionFilter (e.g. "
            "{'kind': sns.SubscriptionFilter.string_filter(allowlist=['a'])}); got ['order']",
        ),
    ],
)
def test_wrong_types_are_rejected_naming_the_option_and_the_value(options, message):
    """Not an AttributeError, TypeError or jsii error from deep inside CDK, nor a string read as a bool."""
    with pytest.raises(ConfigurationError) as raised:
        _build(**options)
    assert str(raised.value) == message


def test_resources_of_the_wrong_kind_are_rejected():
    stack = new_stack()
    with pytest.raises(ConfigurationError, match=r"^topic must be an sns.ITopic; got 'arn:aws:sns:"):
        Messaging(stack, "M1", topic="arn:aws:sns:eu-west-1:111122223333:orders.fifo")  # type: ignore[arg-type]
    with pytest.raises(
        ConfigurationError, match=r"^options must be a MessagingOptions; got \{'fifo': False\}$"
    ):
        Messaging(stack, "M2", options={"fifo": False})  # type: ignore[arg-type]
    queue = sqs.Queue(stack, "Queue", fifo=True, visibility_timeout=Duration.minutes(3))
    with pytest.raises(ConfigurationError, match=r"^table must be an IdempotencyTable \(IdempotencyTable"):
        IdempotentConsumer(stack, "C1", queue=queue, table=IdempotencyTable(stack, "T").table)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"^queue must be an sqs.IQueue; got Topic"):
        IdempotentConsumer(
            stack,
            "C2",
            queue=sns.Topic(stack, "NotAQueue"),  # type: ignore[arg-type]
            table=IdempotencyTable(stack, "T2"),
        )


# -- the rule tables ------------------------------------------------------------------------------------


RULE_TABLES = {
    "messaging": messaging.RULES,
    "table": table.RULES,
    "consumer": consumer.RULES,
    "alarms": _alarms.RULES,
}


class _Unknown:
    """Props whose every value is only known at deploy time."""

    def __getattr__(self, name: str) -> Any:
        return _rules.TOKEN


def _default_props(name: str, scope: cdk.Stack) -> Any:
    """The resolved props of a block built with its defaults (they break no rule)."""
    if name == "alarms":
        return _alarms.Alarms.read(scope, None)
    if name == "table":
        return table.TableProps(None, cdk.RemovalPolicy.RETAIN)
    if name == "messaging":
        return messaging._resolve(scope, None, None, None, None)
    queue = sqs.Queue(scope, "Queue", fifo=True, visibility_timeout=Duration.minutes(3))
    return consumer._resolve(scope, queue, IdempotencyTable(scope, "Table"), None, None, None)


@pytest.mark.parametrize("name", sorted(RULE_TABLES))
def test_every_rule_is_skipped_when_a_value_it_reads_is_a_token(name):
    scope = new_stack()
    sqs.Queue(scope, "Anchor")  # a stack needs a resource to synthesize
    props = _default_props(name, scope)
    for rule in RULE_TABLES[name]:
        _rules.enforce(scope, [rule], _Unknown())  # never raises
        for field in dataclasses.fields(props):
            _rules.enforce(scope, [rule], dataclasses.replace(props, **{field.name: _rules.TOKEN}))
        assert warnings_of(scope) == [], rule.message  # and never warns
    assert all(isinstance(rule, _rules.Rule) for rule in RULE_TABLES[name])


def test_token_values_pass_every_check_and_reach_the_template():
    stack = new_stack()
    timeout = cdk.CfnParameter(stack, "Timeout", type="Number").value_as_number
    batch = cdk.CfnParameter(stack, "Batch", type="Number").value_as_number
    ttl = cdk.CfnParameter(stack, "Ttl", type="Number").value_as_number
    receives = cdk.CfnParameter(stack, "Receives", type="Number").value_as_number
    namespace = cdk.CfnParameter(stack, "Namespace").value_as_string
    IdempotentPipeline(
        stack,
        "Pipeline",
        messaging_options=MessagingOptions(
            visibility_timeout=Duration.minutes(15), max_receive_count=receives
        ),
        consumer_options=ConsumerOptions(
            timeout=Duration.seconds(timeout),
            batch_size=batch,
            dedup_ttl=Duration.seconds(ttl),
            metrics_namespace=namespace,
        ),
    )
    template = template_of(stack)
    function = only(template, "AWS::Lambda::Function")["Properties"]
    assert function["Timeout"] == {"Ref": "Timeout"}
    assert function["Environment"]["Variables"]["DEDUP_TTL_SECONDS"] == {"Ref": "Ttl"}
    assert function["Environment"]["Variables"]["METRICS_NAMESPACE"] == {"Ref": "Namespace"}
    assert "MAX_RECEIVE_COUNT" not in function["Environment"]["Variables"]  # not known at synth
    assert only(template, "AWS::Lambda::EventSourceMapping")["Properties"]["BatchSize"] == {"Ref": "Batch"}


def test_number_tokens_are_recognised():
    stack = new_stack()
    number = cdk.CfnParameter(stack, "N", type="Number").value_as_number
    assert _rules.is_token(number) and _rules.is_token(cdk.Token.as_string(number))
    assert not _rules.is_token(3.5) and not _rules.is_token(-1.8e289) and not _rules.is_token("${Tok")


def test_fractional_seconds_are_rejected():
    with pytest.raises(
        ConfigurationError,
        match=r"^ConsumerOptions.timeout must be a whole number of seconds; got 1 second 500 millis$",
    ):
        _build(consumer__timeout=Duration.millis(1500))


def test_options_documented_in_docs_constructs_md():
    """docs/constructs.md has a row for every option of every block."""
    doc = (REPO / "docs" / "constructs.md").read_text()
    for options in OPTIONS:
        section = doc.split(f"### `{options.__name__}`", 1)
        assert len(section) == 2, f"docs/constructs.md has no section for {options.__name__}"
        body = section[1].split("\n### ", 1)[0]
        for field in dataclasses.fields(options):
            assert f"| `{field.name}` |" in body, (
                f"{options.__name__}.{field.name} missing in docs/constructs.md"
            )


def test_package_has_no_second_configuration_error():
    for path in Path(idempotent_pipeline.__file__).parent.glob("*.py"):
        assert "class ConfigurationError" not in path.read_text(), path.name
