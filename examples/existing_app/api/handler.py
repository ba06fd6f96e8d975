"""POST /orders: keep the order's upload, then publish each of its lines to the pipeline's topic (FIFO:
grouped by order, deduplicated by order and line), and answer with the shop's greeting."""

import json
import os

import boto3

sns = boto3.client("sns")
s3 = boto3.client("s3")
ssm = boto3.client("ssm")
secrets = boto3.client("secretsmanager")


def handle(event, context):
    order = json.loads(event.get("body") or "{}")
    if not order.get("order_id") or not order.get("lines"):
        return {"statusCode": 400, "body": json.dumps({"error": "an order needs order_id and lines"})}
    secrets.get_secret_value(SecretId=os.environ["API_KEY_SECRET"])  # the partner call would use it
    s3.put_object(Bucket=os.environ["BUCKET"], Key=f"orders/{order['order_id']}.json", Body=json.dumps(order))
    for line in order["lines"]:
        body = json.dumps({"order_id": order["order_id"], **line}, sort_keys=True)
        sns.publish(
            TopicArn=os.environ["TOPIC_ARN"],
            Message=body,
            MessageGroupId=str(order["order_id"]),
            MessageDeduplicationId=f"{order['order_id']}#{line['line_id']}",
        )
    greeting = ssm.get_parameter(Name=os.environ["GREETING_PARAMETER"])["Parameter"]["Value"]
    accepted = {"accepted": order["order_id"], "lines": len(order["lines"]), "message": greeting}
    return {"statusCode": 202, "headers": {"Content-Type": "application/json"}, "body": json.dumps(accepted)}
