"""IdempotencyTable: keys, TTL, billing, recovery, encryption and removal policy in the template."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from constructs_helpers import new_stack, only

from idempotent_pipeline import ConfigurationError, IdempotencyTable


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
    template = synth(
        lambda stack: IdempotencyTable(
            stack,
            "Table",
            partition_key_name="order_id",
            sort_key_name="line_id",
            time_to_live_attribute="ttl",
        )
    )
    props = only(template, "AWS::DynamoDB::Table")["Properties"]
    assert [k["AttributeName"] for k in props["KeySchema"]] == ["order_id", "line_id"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}


def test_customer_managed_key_removal_policy_recovery_and_protection_are_configurable(synth):
    def build(stack: cdk.Stack) -> None:
        IdempotencyTable(
            stack,
            "Table",
            encryption_key=kms.Key(stack, "Key"),
            removal_policy=RemovalPolicy.DESTROY,
            point_in_time_recovery=False,
            deletion_protection=True,
        )

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


def test_attributes_expose_table_and_names():
    stack = new_stack()
    construct = IdempotencyTable(stack, "Table", partition_key_name="a", sort_key_name="b")
    assert (construct.partition_key_name, construct.sort_key_name, construct.time_to_live_attribute) == (
        "a",
        "b",
        "expires_at",
    )
    assert construct.table.node.path == "TestStack/Table/Table"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"partition_key_name": "id", "sort_key_name": "id"},
            "partition_key_name and sort_key_name must differ; both are 'id'",
        ),
        ({"partition_key_name": ""}, "partition_key_name must be a non-empty attribute name; got ''"),
        ({"sort_key_name": ""}, "sort_key_name must be a non-empty attribute name; got ''"),
        ({"time_to_live_attribute": ""}, "time_to_live_attribute must be a non-empty attribute name; got ''"),
        (
            {"time_to_live_attribute": "sk"},
            "time_to_live_attribute must differ from the key attributes; got 'sk' (keys 'pk', 'sk')",
        ),
    ],
)
def test_invalid_key_names_are_rejected(props, message):
    with pytest.raises(ConfigurationError) as raised:
        IdempotencyTable(new_stack(), "Table", **props)
    assert str(raised.value) == message
