"""Stand-in consumer: one conditional PutItem per record keyed by the body's ``x`` and ``y``.

A body that is not a JSON object with string ``x`` and ``y`` is reported as a batch item failure, so it
reaches the dead-letter queue through redrive.
"""

import contextlib
import json
import os

import boto3

TABLE_NAME = os.environ["TABLE_NAME"]
_client = boto3.client("dynamodb")


def handler(event, context):
    failures = []
    for record in event["Records"]:
        try:
            body = json.loads(record["body"])
            item = {"pk": {"S": body["x"]}, "sk": {"S": body["y"]}, "body": {"S": record["body"]}}
        except (ValueError, KeyError, TypeError):
            failures.append({"itemIdentifier": record["messageId"]})
            continue
        with contextlib.suppress(_client.exceptions.ConditionalCheckFailedException):
            _client.put_item(TableName=TABLE_NAME, Item=item, ConditionExpression="attribute_not_exists(pk)")
    return {"batchItemFailures": failures}
