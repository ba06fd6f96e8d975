"""DynamoDB in the emulator behaves as AWS documents it where moto 5.2.5 does not (see
idempotent_local.patches): a conditional write is atomic, also when the server runs two at once."""

from __future__ import annotations

import threading
import time
from typing import Any

import boto3
import pytest
from moto import mock_aws


def test_two_conditional_writes_of_one_key_at_once_pass_their_condition_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from moto.dynamodb.models import table

    from idempotent_local import patches

    parse = table.get_filter_expression

    def slow_parse(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.05)  # between moto's read of the item and its write: the other request runs here
        return parse(*args, **kwargs)

    monkeypatch.setattr(table, "get_filter_expression", slow_parse)
    with mock_aws():
        patches.apply()
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="charges",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        outcomes: list[str] = []

        def charge(writer: str) -> None:
            try:
                dynamodb.put_item(
                    TableName="charges",
                    Item={"pk": {"S": "charge-1"}, "writer": {"S": writer}},
                    ConditionExpression="attribute_not_exists(pk)",
                )
                outcomes.append("written")
            except dynamodb.exceptions.ConditionalCheckFailedException:
                outcomes.append("refused")

        writers = [threading.Thread(target=charge, args=(name,)) for name in ("a", "b")]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()

    assert sorted(outcomes) == ["refused", "written"]
