"""IdempotencyTable: keys, TTL, billing, recovery, encryption, removal policy, and existing tables."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct
from constructs_helpers import cdk_json_context, new_stack, only, resources, template_of, warnings_of

from idempotent_pipeline import ConfigurationError, IdempotencyTable, TableOptions
from idempotent_pipeline.options import EXPLICIT_TABLE_NAME_FLAG


@pytest.fixture(scope="session")
def default_table(synth) -> dict:
    return only(synth(lambda stack: IdempotencyTable(stack, "Table")), "AWS::DynamoDB::Table")


def test_default_keys_are_pk_and_sk_strings(default_table):
    props = default_table["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert props["AttributeDefinitions"] == [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
    ]


def test_ttl_on_demand_billing_and_point_in_time_recovery_by_default(default_table):
    props = default_table["Properties"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_default_encryption_is_the_aws_owned_key(default_table):
    # DynamoDB always encrypts at rest; SSEEnabled false selects the AWS-owned key (no KMS charges).
    assert default_table["Properties"]["SSESpecification"] == {"SSEEnabled": False}


def test_table_is_retained_by_default(default_table):
    assert default_table["DeletionPolicy"] == "Retain"
    assert default_table["UpdateReplacePolicy"] == "Retain"


def test_key_and_ttl_names_are_configurable(synth):
    options = TableOptions(
        partition_key_name="order_id", sort_key_name="line_id", time_to_live_attribute="ttl"
    )
    props = only(
        synth(lambda stack: IdempotencyTable(stack, "Table", options=options)), "AWS::DynamoDB::Table"
    )["Properties"]
    assert [k["AttributeName"] for k in props["KeySchema"]] == ["order_id", "line_id"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}


def test_customer_managed_key_removal_policy_recovery_and_protection_are_configurable(synth):
    def build(stack: cdk.Stack) -> None:
        options = TableOptions(
            encryption_key=kms.Key(stack, "Key"),
            removal_policy=RemovalPolicy.DESTROY,
            point_in_time_recovery=False,
            deletion_protection=True,
        )
        IdempotencyTable(stack, "Table", options=options)

    template = synth(build)
    table = only(template, "AWS::DynamoDB::Table")
    key_id = next(k for k in template.to_json()["Resources"] if k.startswith("Key"))
    assert table["Properties"]["SSESpecification"] == {
        "KMSMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]},
        "SSEEnabled": True,
        "SSEType": "KMS",
    }
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": False}
    assert table["Properties"]["DeletionProtectionEnabled"] is True


def test_attributes_expose_table_names_and_key():
    stack = new_stack()
    key = kms.Key(stack, "Key")
    construct = IdempotencyTable(
        stack, "Table", options=TableOptions(partition_key_name="a", sort_key_name="b", encryption_key=key)
    )
    assert (construct.partition_key_name, construct.sort_key_name, construct.time_to_live_attribute) == (
        "a",
        "b",
        "expires_at",
    )
    assert construct.encryption_key is key
    assert construct.table.node.path == "TestStack/Table/Table"


def test_snapshot_removal_policy_is_rejected():
    """DynamoDB tables do not support SNAPSHOT; today's reference app offered it."""
    with pytest.raises(ConfigurationError) as raised:
        IdempotencyTable(new_stack(), "T", options=TableOptions(removal_policy=RemovalPolicy.SNAPSHOT))
    assert str(raised.value) == (
        "TableOptions.removal_policy must be RETAIN, DESTROY or RETAIN_ON_UPDATE_OR_DELETE (DynamoDB "
        "tables do "
        "not support SNAPSHOT); got RemovalPolicy.SNAPSHOT"
    )


ATTRIBUTE_NAME = (
    "must be a non-empty attribute name, not beginning with 'idempotency:' (the runtime's own attributes); "
)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"partition_key_name": "id", "sort_key_name": "id"},
            "TableOptions.partition_key_name, TableOptions.sort_key_name and "
            "TableOptions.time_to_live_attribute must be three different attribute names; got 'id', 'id', "
            "'expires_at'",
        ),
        (
            {"partition_key_name": ""},
            f"TableOptions.partition_key_name {ATTRIBUTE_NAME}got ''",
        ),
        (
            {"sort_key_name": " "},
            f"TableOptions.sort_key_name {ATTRIBUTE_NAME}got ' '",
        ),
        (
            {"time_to_live_attribute": ""},
            f"TableOptions.time_to_live_attribute {ATTRIBUTE_NAME}got ''",
        ),
        (
            {"time_to_live_attribute": "sk"},
            "TableOptions.partition_key_name, TableOptions.sort_key_name and "
            "TableOptions.time_to_live_attribute must be three different attribute names; got 'pk', 'sk', "
            "'sk'",
        ),
        (
            {"partition_key_name": "idempotency:key"},
            f"TableOptions.partition_key_name {ATTRIBUTE_NAME}got 'idempotency:key'",
        ),
    ],
)
def test_invalid_key_names_are_rejected(props, message):
    with pytest.raises(ConfigurationError) as raised:
        IdempotencyTable(new_stack(), "Table", options=TableOptions(**props))
    assert str(raised.value) == message


# -- existing tables ----------------------------------------------------------------------------------------


def test_from_table_carries_the_names_and_the_imported_key():
    stack = new_stack()
    key = kms.Key.from_key_arn(stack, "Key", "arn:aws:kms:eu-west-1:111122223333:key/abc")
    existing = dynamodb.Table.from_table_attributes(stack, "Orders", table_name="orders", encryption_key=key)
    table = IdempotencyTable.from_table(
        stack,
        "Existing",
        existing,
        partition_key_name="tenant",
        sort_key_name="event",
        time_to_live_attribute="gone",
    )
    assert isinstance(table, IdempotencyTable)
    assert table.table is existing
    assert (table.partition_key_name, table.sort_key_name, table.time_to_live_attribute) == (
        "tenant",
        "event",
        "gone",
    )
    assert table.encryption_key is not None
    assert stack.resolve(table.encryption_key.key_arn) == "arn:aws:kms:eu-west-1:111122223333:key/abc"


def test_from_table_checks_a_table_of_the_app_against_the_names():
    stack = new_stack()
    plain = dynamodb.Table(
        stack,
        "Plain",
        partition_key=dynamodb.Attribute(name="order_id", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="line_id", type=dynamodb.AttributeType.STRING),
    )
    with pytest.raises(
        ConfigurationError,
        match=r"^partition_key_name must match the table's key attribute 'order_id'; got 'pk'$",
    ):
        IdempotencyTable.from_table(stack, "Wrong", plain)
    IdempotencyTable.from_table(stack, "Right", plain, partition_key_name="order_id", sort_key_name="line_id")


def test_from_table_rejects_a_table_without_sort_key_or_with_number_keys():
    stack = new_stack()
    no_sort = dynamodb.Table(
        stack, "NoSort", partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)
    )
    with pytest.raises(
        ConfigurationError, match=r"one string partition key and one string sort key; .* has 0 sort"
    ):
        IdempotencyTable.from_table(stack, "A", no_sort)
    numbers = dynamodb.Table(
        stack,
        "Numbers",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.NUMBER),
        sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
    )
    with pytest.raises(ConfigurationError, match=r"^table key 'pk' must be of type string; got NUMBER$"):
        IdempotencyTable.from_table(stack, "B", numbers)


def test_from_table_rejects_what_is_not_a_table():
    stack = new_stack()
    with pytest.raises(ConfigurationError, match=r"^table must be a dynamodb.ITable; got 'orders'$"):
        IdempotencyTable.from_table(stack, "T", "orders")  # type: ignore[arg-type]


# -- the table's name: a change that would replace the table fails the deploy ------------------------------


def _table_in(stack: cdk.Stack, **options: Any) -> dict[str, Any]:
    IdempotencyTable(stack, "Table", options=TableOptions(**options))
    return only(template_of(stack), "AWS::DynamoDB::Table")


def test_the_table_is_named_from_its_stack_and_path(default_table):
    """With the flag cdk.json sets: an explicit name, so CloudFormation refuses to replace the table (key
    names) instead of silently creating a new, empty one while the old one stays retained."""
    assert default_table["Properties"]["TableName"] == "TestStack-Table-0AFE2439"


def test_a_key_change_keeps_the_name_so_cloudformation_refuses_the_replacement():
    before = _table_in(new_stack("Orders"))
    after = _table_in(new_stack("Orders"), partition_key_name="order_id", sort_key_name="line_id")
    assert before["Properties"]["KeySchema"] != after["Properties"]["KeySchema"]
    assert before["Properties"]["TableName"] == after["Properties"]["TableName"] == "Orders-Table-C3D8F3FA"
    # Renaming is the deliberate replacement: the old table, with its data, stays.
    assert (after["DeletionPolicy"], after["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_tables_of_other_stacks_and_paths_get_other_names():
    stack = new_stack("Orders")
    for path in ("One", "Two"):
        IdempotencyTable(Construct(stack, path), "Table")
    names = [
        t["Properties"]["TableName"] for t in resources(template_of(stack), "AWS::DynamoDB::Table").values()
    ]
    names.append(_table_in(new_stack("Refunds"))["Properties"]["TableName"])
    assert len(set(names)) == 3 and all(3 <= len(name) <= 255 for name in names)


def test_table_name_chooses_the_name():
    assert _table_in(new_stack(), table_name="orders-v2")["Properties"]["TableName"] == "orders-v2"


@pytest.mark.parametrize("name", ["ab", "orders v2", "x" * 256])
def test_a_table_name_dynamodb_refuses_is_refused(name):
    with pytest.raises(ConfigurationError) as raised:
        _table_in(new_stack(), table_name=name)
    assert str(raised.value) == (
        "TableOptions.table_name must be 3 to 255 letters, digits, '_', '.' or '-' (DynamoDB's rule); got "
        f"{name!r}"
    )


def _stack_with_flag(value: object) -> cdk.Stack:
    context = {k: v for k, v in cdk_json_context().items() if k != EXPLICIT_TABLE_NAME_FLAG}
    if value is not None:
        context[EXPLICIT_TABLE_NAME_FLAG] = value
    return cdk.Stack(cdk.App(context=context), "Upgraded")


@pytest.mark.parametrize("value", [False, "false"])
def test_the_flag_false_keeps_cloudformations_generated_name_without_a_warning(value):
    """A stack deployed with 0.2 has a generated name: naming its table would replace it."""
    stack = _stack_with_flag(value)
    assert "TableName" not in _table_in(stack)["Properties"]
    assert warnings_of(stack) == []


def test_without_the_flag_the_generated_name_stays_and_synth_warns():
    stack = _stack_with_flag(None)
    assert "TableName" not in _table_in(stack)["Properties"]
    ((path, message),) = warnings_of(stack)
    assert path == "/Upgraded/Table"
    assert message.startswith(
        "the table's name is generated by CloudFormation: a change that replaces the table "
        "(TableOptions.partition_key_name, sort_key_name) deploys a new, empty table"
    )
    assert "'@idempotent-pipeline:explicitTableName'" in message
    assert message.endswith("[ack: idempotent-pipeline:replaceable-table]")


def test_the_flag_true_from_the_command_line_names_the_table():
    assert _table_in(_stack_with_flag("true"))["Properties"]["TableName"] == "Upgraded-Table-F872B5B3"


def test_a_flag_that_is_not_a_boolean_is_refused():
    with pytest.raises(ConfigurationError) as raised:
        _table_in(_stack_with_flag("yes please"))
    assert str(raised.value) == (
        "context @idempotent-pipeline:explicitTableName must be true or false; got 'yes please'"
    )
