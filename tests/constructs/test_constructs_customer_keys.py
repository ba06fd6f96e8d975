"""With ``customer_managed_keys``, every place the reference app (under each of its context keys) and an
``init`` app keep a message's data at rest is under a key of the app: queues and dead-letter queues, topics,
tables and their streams, durable executions, workflows, log groups. The walk is generic: every resource of
those types, each failure naming the resource."""

from __future__ import annotations

import json
import re
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs_helpers import (
    add_nag_checks,
    cdk_json_context,
    cfn_lint_findings,
    nag_findings,
    needs_reference_app,
    new_stack,
    only,
    reference_stack,
    resources,
    template_of,
    warnings_of,
)

import app as reference_app
from idempotent_cli.main import main
from idempotent_pipeline import ConfigurationError, ConsumerOptions, IdempotentPipeline

KEYS = {"customer_managed_keys": "true"}
# The reference app's context keys that add, remove or change resources (each flag turned from its
# default), every mode, and the combinations its other tests synthesize.
FLAGS = {
    name: "false" if name in ("fifo", "topic") else "true"
    for name, key in reference_app.CONTEXT.items()
    if isinstance(key.kind, reference_app.Flag) and name != "customer_managed_keys"
}
MODES = {
    "transaction": {"mode": "transaction"},
    "guarded": {"mode": "guarded"},
    "versioned": {"mode": "versioned", "version_field": "v", "fifo": "false"},
}
COMBINATIONS = {
    "workflow in a vpc": {"workflow": "true", "vpc": "true"},
    "durable function in a vpc": {"durable": "true", "vpc": "true"},
    "two hops, standard first queue": {"outbox": "true", "fifo": "false"},
    "everything": {
        "fifo": "false",
        "dashboard": "true",
        "tracing": "true",
        "vpc": "true",
        "alarm_topic": "true",
        "mode": "transaction",
    },
}
VARIANTS = {
    **{f"{name}={value}": {name: value} for name, value in FLAGS.items()},
    **MODES,
    **COMBINATIONS,
}


def test_every_flag_of_the_reference_app_is_walked():
    assert {"fifo", "topic", "outbox", "durable", "workflow", "dashboard", "tracing", "vpc"} <= set(FLAGS)
    assert "alarm_topic" in FLAGS


def _key_ids(resources: dict[str, Any]) -> set[str]:
    return {name for name, resource in resources.items() if resource["Type"] == "AWS::KMS::Key"}


def _customer_key(value: Any, keys: set[str]) -> bool:
    """A reference to a KMS key of the template (its ARN or id), never an AWS managed alias or none."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return value["Fn::GetAtt"][0] in keys
    return isinstance(value, dict) and value.get("Ref") in keys


# Resource type -> where its customer key is (None: nothing to check for that resource).
WHERE: dict[str, Callable[[dict[str, Any]], Any]] = {
    "AWS::SQS::Queue": lambda p: p.get("KmsMasterKeyId", "SSE-SQS"),
    "AWS::SNS::Topic": lambda p: p.get("KmsMasterKeyId", "no key"),
    # The stream of a table is encrypted under the table's key.
    "AWS::DynamoDB::Table": lambda p: (p.get("SSESpecification") or {}).get("KMSMasterKeyId", "AWS owned"),
    "AWS::StepFunctions::StateMachine": lambda p: (p.get("EncryptionConfiguration") or {}).get(
        "KmsKeyId", "AWS owned"
    ),
    "AWS::Lambda::Function": lambda p: (
        p["DurableConfig"].get("KMSKeyArn", "AWS owned") if "DurableConfig" in p else None
    ),
    "AWS::Logs::LogGroup": lambda p: p.get("KmsKeyId", "CloudWatch Logs' own"),
}


def unkeyed(template: dict[str, Any]) -> list[str]:
    """Every resource keeping data at rest that is not under a key of the template: 'type name: what'."""
    resources = template["Resources"]
    keys = _key_ids(resources)
    found = []
    for name, resource in resources.items():
        where = WHERE.get(resource["Type"])
        value = where(resource.get("Properties", {})) if where is not None else None
        if value is not None and not _customer_key(value, keys):
            found.append(f"{resource['Type']} {name}: {json.dumps(value)}")
    return found


@pytest.fixture(scope="module")
def reference_templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Variant -> its template: every variant a stack of one app, synthesized once."""
    code = tmp_path_factory.mktemp("code")
    (code / "orders.py").write_text("def handle(message, table):\n    return None\n")
    app = cdk.App(context=cdk_json_context(), outdir=str(tmp_path_factory.mktemp("keyed")))
    stacks = {}
    for index, (variant, context) in enumerate(VARIANTS.items()):
        context = {**KEYS, **context}
        if context.get("mode") in ("transaction", "guarded"):
            context = {**context, "processor": "orders:handle", "code_directory": str(code)}
        stacks[variant] = reference_stack(context, f"Keyed{index}", app).stack_name
    assembly = app.synth()
    return {variant: assembly.get_stack_by_name(name).template for variant, name in stacks.items()}


@needs_reference_app
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_place_the_reference_app_keeps_data_is_under_a_customer_key(reference_templates, variant):
    template = reference_templates[variant]
    assert unkeyed(template) == []
    assert any(r["Type"] == "AWS::Logs::LogGroup" for r in template["Resources"].values())


def _conditions(node: Any) -> list[tuple[str, Any]]:
    """(condition key, value) of every policy statement under ``node`` (policies and key policies)."""
    if isinstance(node, list):
        return [found for child in node for found in _conditions(child)]
    if not isinstance(node, dict):
        return []
    found = [
        (key, value) for operator in (node.get("Condition") or {}).values() for key, value in operator.items()
    ]
    return found + [found for child in node.values() for found in _conditions(child)]


def _ends_unnamed(value: Any) -> bool:
    """An ARN built without its resource's name: its text (a literal, or a join's last part) ends in ':'."""
    if isinstance(value, dict) and "Fn::Join" in value:
        value = value["Fn::Join"][1][-1]
    return isinstance(value, str) and value.endswith(":")


@needs_reference_app
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_key_grant_condition_names_its_resource(reference_templates, variant):
    """A grant conditioned on an encryption context ARN with no resource name in it matches nothing: the
    workflow's role could not use the data key (an unnamed state machine)."""
    unnamed = [
        f"{name}: {key}"
        for name, resource in reference_templates[variant]["Resources"].items()
        for key, value in _conditions(resource.get("Properties", {}))
        if key.startswith("kms:EncryptionContext:") and _ends_unnamed(value)
    ]
    assert unnamed == []


@needs_reference_app
@pytest.mark.parametrize("keys", [True, False], ids=["keyed", "unkeyed"])
def test_the_keyed_workflow_is_named_within_80_characters_and_the_unkeyed_one_keeps_no_name(keys):
    """Named only where the key grant needs its ARN (a name replaces the state machine of an unkeyed stack
    on upgrade); a stack name of 100 characters still gives a name Step Functions takes."""
    context = {"workflow": "true", "mode": "guarded", "customer_managed_keys": str(keys).lower()}
    stack = reference_stack(context, "S" * 100)
    (machine,) = template_of(stack).find_resources("AWS::StepFunctions::StateMachine").values()
    name = machine["Properties"].get("StateMachineName")
    if not keys:
        assert name is None
        return
    assert len(name) == 80 and name.startswith("S" * 62 + "-") and name.endswith("-Workflow"), name
    assert re.fullmatch(r"[A-Za-z0-9_-]+", name)


@needs_reference_app
@pytest.mark.parametrize(
    ("variant", "type_"),
    [
        ("workflow=true", "AWS::StepFunctions::StateMachine"),
        ("durable=true", "AWS::Lambda::Function"),
        ("outbox=true", "AWS::DynamoDB::Table"),
    ],
)
def test_the_walk_reaches_workflows_durable_executions_and_streams(reference_templates, variant, type_):
    """The kinds of resource a variant adds are there to be walked (a walk over nothing passes)."""
    resources = reference_templates[variant]["Resources"].values()
    assert any(r["Type"] == type_ and WHERE[type_](r["Properties"]) is not None for r in resources)
    if variant == "outbox=true":
        assert any("StreamSpecification" in r["Properties"] for r in resources if r["Type"] == type_)


def test_the_walk_names_a_resource_left_under_an_aws_key():
    template = {
        "Resources": {
            "Key": {"Type": "AWS::KMS::Key", "Properties": {}},
            "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"KmsMasterKeyId": "alias/aws/sqs"}},
            "Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {}},
            "Keyed": {
                "Type": "AWS::Logs::LogGroup",
                "Properties": {"KmsKeyId": {"Fn::GetAtt": ["Key", "Arn"]}},
            },
            "Plain": {"Type": "AWS::Lambda::Function", "Properties": {}},
        }
    }
    assert unkeyed(template) == [
        'AWS::SQS::Queue Queue: "alias/aws/sqs"',
        'AWS::Logs::LogGroup Logs: "CloudWatch Logs\' own"',
    ]


@needs_reference_app
def test_every_place_an_init_app_keeps_data_is_under_a_customer_key(tmp_path):
    directory = tmp_path / "shop"
    assert main(["init", str(directory)]) == 0
    context = {**json.loads((directory / "cdk.json").read_text())["context"], **KEYS}
    outdir = tmp_path / "cdk.out"
    created = cdk.App

    def keyed_app(**props: Any) -> cdk.App:
        """The App app.py creates, as `npx cdk synth -c customer_managed_keys=true` would give it its context
        (jsii's process was started before: the CLI's environment would not reach it)."""
        app = created(**{**props, "context": context, "outdir": str(outdir)})
        add_nag_checks(app)
        return app

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cdk, "App", keyed_app)
        runpy.run_path(str(directory / "app.py"), run_name="__main__")
    template = json.loads((outdir / "Shop.template.json").read_text())
    assert unkeyed(template) == []
    assert nag_findings(outdir) == [] and cfn_lint_findings(template) == []
    assert {r["Type"] for r in template["Resources"].values()} >= {"AWS::KMS::Key", "AWS::Logs::LogGroup"}


@needs_reference_app
def test_without_customer_managed_keys_the_walk_finds_what_rests_under_aws_keys(reference_templates):
    """The same walk on the default stack lists its queues, topic, table and log group: the test can fail."""
    stack = reference_stack({}, "Plain")
    found = unkeyed(stack.node.root.synth().get_stack_by_name(stack.stack_name).template)
    assert {entry.split()[0] for entry in found} == {
        "AWS::SQS::Queue",
        "AWS::SNS::Topic",
        "AWS::DynamoDB::Table",
        "AWS::Logs::LogGroup",
    }


# -- the blocks' option: ConsumerOptions.log_encryption_key (and the relay's) -------------------------------


def _logged_pipeline(stack: cdk.Stack, key: kms.IKey, user_code: Path) -> None:
    IdempotentPipeline(
        stack,
        "Pipeline",
        consumer_options=ConsumerOptions(
            mode="transaction",
            processor="orders:handle",
            code_directory=str(user_code),
            log_encryption_key=key,
        ),
        emit_target=sns.Topic(stack, "Next", fifo=True),
    )


def test_the_consumer_and_its_relay_log_under_the_key_cloudwatch_logs_may_use(user_code):
    stack = new_stack()
    key = kms.Key(stack, "LogKey", enable_key_rotation=True)
    _logged_pipeline(stack, key, user_code)
    template = template_of(stack)
    groups = resources(template, "AWS::Logs::LogGroup")
    assert len(groups) == 2  # the consumer's and the relay's
    assert {json.dumps(g["Properties"]["KmsKeyId"]) for g in groups.values()} == {
        json.dumps(stack.resolve(key.key_arn))
    }
    (statement,) = [
        s
        for s in only(template, "AWS::KMS::Key")["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Sid") == "AllowCloudWatchLogsToEncryptLogGroups"
    ]
    assert statement["Principal"] == {"Service": stack.resolve(f"logs.{cdk.Aws.REGION}.amazonaws.com")}
    assert statement["Condition"] == {
        "ArnLike": {
            "kms:EncryptionContext:aws:logs:arn": stack.resolve(
                f"arn:{cdk.Aws.PARTITION}:logs:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:log-group:*"
            )
        }
    }


def test_an_imported_log_key_is_warned_about_with_the_statement_to_add(user_code):
    stack = new_stack()
    key = kms.Key.from_key_arn(
        stack, "Imported", "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    )
    _logged_pipeline(stack, key, user_code)
    texts = [text for _, text in warnings_of(stack)]
    assert any(
        text.startswith("ConsumerOptions.log_encryption_key is an imported key") and "logs.<region>" in text
        for text in texts
    )
    assert any(text.startswith("OutboxRelay.log_encryption_key is an imported key") for text in texts)


def test_a_log_key_of_another_type_is_refused():
    with pytest.raises(ConfigurationError, match=r"^ConsumerOptions.log_encryption_key must be a kms.IKey"):
        IdempotentPipeline(
            new_stack(), "Pipeline", consumer_options=ConsumerOptions(log_encryption_key="key")
        )
