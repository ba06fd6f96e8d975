"""Lambda's event filtering, checked against the examples of AWS's documentation: Lambda's comparison
operators, its DynamoDB stream examples, and EventBridge's pattern rules that Lambda follows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from idempotent_local.event_filter import InvalidPattern, compile_pattern, matches

# The record of Lambda's "Using event filtering with a DynamoDB event source".
CUSTOMER = {
    "eventID": "1",
    "eventName": "INSERT",
    "eventVersion": "1.0",
    "dynamodb": {
        "ApproximateCreationDateTime": "1678831218.0",
        "Keys": {"CustomerName": {"S": "AnyCompany Industries"}},
        "NewImage": {
            "AccountManager": {"S": "Pat Candella"},
            "PaymentTerms": {"S": "60 days"},
            "CustomerName": {"S": "AnyCompany Industries"},
        },
        "SequenceNumber": "111",
        "SizeBytes": 26,
        "StreamViewType": "NEW_IMAGE",
    },
}


def _passes(pattern: dict[str, Any], record: dict[str, Any]) -> bool:
    return matches([json.dumps(pattern)], record)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ({"dynamodb": {"Keys": {"CustomerName": {"S": ["AnyCompany Industries"]}}}}, True),
        ({"dynamodb": {"Keys": {"CustomerName": {"S": ["Another Company"]}}}}, False),
        ({"dynamodb": {"NewImage": {"AccountManager": {"S": ["Pat Candella"]}}}}, True),
        ({"dynamodb": {"NewImage": {"PaymentTerms": {"S": [{"prefix": "60"}]}}}}, True),
        ({"dynamodb": {"NewImage": {"PaymentTerms": {"S": [{"anything-but": ["60 days"]}]}}}}, False),
        ({"dynamodb": {"NewImage": {"AccountManager": {"S": [{"exists": True}]}}}}, True),
        ({"dynamodb": {"NewImage": {"Discount": {"S": [{"exists": False}]}}}}, True),
        ({"dynamodb": {"NewImage": {"AccountManager": {"S": [{"exists": False}]}}}}, False),
        # exists looks at leaves only: the attribute itself is an object ({"S": ...}), not a leaf.
        ({"dynamodb": {"NewImage": {"AccountManager": [{"exists": True}]}}}, False),
        ({"eventName": ["INSERT", "MODIFY"]}, True),
        ({"eventName": ["REMOVE"]}, False),
        ({"eventName": ["INSERT"], "dynamodb": {"Keys": {"CustomerName": {"S": ["Other"]}}}}, False),
        ({"dynamodb": {"SizeBytes": [{"numeric": [">", 10, "<=", 26]}]}}, True),
        ({"dynamodb": {"SizeBytes": [{"numeric": ["<", 26]}]}}, False),
        # DynamoDB's numbers are strings ({"N": "5"}): numeric rules never match them.
        ({"dynamodb": {"SequenceNumber": [{"numeric": ["=", 111]}]}}, False),
        ({"dynamodb": {"OldImage": {"CustomerName": {"S": ["AnyCompany Industries"]}}}}, False),
    ],
)
def test_dynamodb_stream_records_are_filtered_as_lambdas_examples_say(
    pattern: dict[str, Any], expected: bool
) -> None:
    assert _passes(pattern, CUSTOMER) is expected


# Lambda's table of comparison operators, each rule with a record it matches and one it does not.
OPERATORS = [
    ("null", {"UserID": [None]}, {"UserID": None}, {"UserID": ""}),
    ("empty", {"LastName": [""]}, {"LastName": ""}, {"LastName": None}),
    ("equals", {"Name": ["Alice"]}, {"Name": "Alice"}, {"Name": "alice"}),
    ("equals-ignore-case", {"Name": [{"equals-ignore-case": "alice"}]}, {"Name": "ALICE"}, {"Name": "Bob"}),
    (
        "and",
        {"Location": ["New York"], "Day": ["Monday"]},
        {"Location": "New York", "Day": "Monday"},
        {"Location": "New York", "Day": "Tuesday"},
    ),
    ("or", {"PaymentType": ["Credit", "Debit"]}, {"PaymentType": "Debit"}, {"PaymentType": "Cash"}),
    (
        "or-across-fields",
        {"$or": [{"Location": ["New York"]}, {"Day": ["Monday"]}]},
        {"Location": "Paris", "Day": "Monday"},
        {"Location": "Paris", "Day": "Sunday"},
    ),
    ("not", {"Weather": [{"anything-but": ["Raining"]}]}, {"Weather": "Sunny"}, {"Weather": "Raining"}),
    ("numeric-equals", {"Price": [{"numeric": ["=", 100]}]}, {"Price": 100}, {"Price": 101}),
    ("numeric-range", {"Price": [{"numeric": [">", 10, "<=", 20]}]}, {"Price": 20}, {"Price": 10}),
    ("exists", {"ProductName": [{"exists": True}]}, {"ProductName": "tea"}, {"Other": "tea"}),
    ("does-not-exist", {"ProductName": [{"exists": False}]}, {"Other": "tea"}, {"ProductName": "tea"}),
    ("begins-with", {"Region": [{"prefix": "us-"}]}, {"Region": "us-east-1"}, {"Region": "eu-west-1"}),
    ("ends-with", {"FileName": [{"suffix": ".png"}]}, {"FileName": "a.png"}, {"FileName": "a.jpg"}),
]


@pytest.mark.parametrize(
    ("rule", "matching", "other"), [o[1:] for o in OPERATORS], ids=[o[0] for o in OPERATORS]
)
def test_each_comparison_operator_of_lambdas_table(
    rule: dict[str, Any], matching: dict[str, Any], other: dict[str, Any]
) -> None:
    assert _passes(rule, matching)
    assert not _passes(rule, other)


def test_eventbridge_rules_lambda_follows() -> None:
    # Numbers compare by their JSON text: 300, 300.0 and 3.0e2 are different values.
    assert _passes({"x": [300]}, {"x": 300}) and not _passes({"x": [300]}, {"x": 300.0})
    # An array in the record matches when the rule matches one of its elements.
    assert _passes({"resources": ["b", "x"]}, {"resources": ["a", "b"]})
    # A rule needs its field: anything-but does not match a record without it.
    assert not _passes({"state": [{"anything-but": "initializing"}]}, {"other": 1})
    # anything-but with a number, a list of numbers, a prefix and a suffix.
    assert _passes({"x-limit": [{"anything-but": 123}]}, {"x-limit": 124})
    assert not _passes({"x-limit": [{"anything-but": [100, 200, 300]}]}, {"x-limit": 200})
    assert not _passes({"state": [{"anything-but": {"prefix": "init"}}]}, {"state": "initializing"})
    assert _passes({"file": [{"anything-but": {"suffix": ".png"}}]}, {"file": "a.jpg"})
    # exists: false matches a field that is an object (not a leaf), as EventBridge documents.
    assert _passes({"detail": {"c-count": [{"exists": False}]}}, {"detail": {"c-count": {"c1": 100}}})
    # A boolean is not a number: true does not equal 1.
    assert not _passes({"flag": [1]}, {"flag": True}) and _passes({"flag": [True]}, {"flag": True})
    # Several filters: a record passes when one of them matches; no filter at all lets everything through.
    assert matches(['{"a": ["1"]}', '{"b": ["2"]}'], {"b": "2"})
    assert matches([], {"anything": "at all"})


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        '{"a": []}',
        '{"a": "value, not a list"}',
        '{"a": [{"prefix": 1}]}',
        '{"a": [{"numeric": [">"]}]}',
        '{"a": [{"numeric": [">", 1, ">=", 2]}]}',
        '{"a": [{"exists": "yes"}]}',
        '{"a": [{"anything-but": []}]}',
        '{"a": [{"unknown-operator": 1}]}',
        '{"a": [{"prefix": "x", "suffix": "y"}]}',
        '{"$or": [{"a": ["1"]}]}',
        '{"a": [{"cidr": "10.0.0.0/24"}]}',
        '{"a": ["' + "x" * 4100 + '"]}',
    ],
)
def test_patterns_lambda_refuses_are_refused(text: str) -> None:
    with pytest.raises(InvalidPattern):
        compile_pattern(text)
