"""A small stand-in for the reference stack: the same resource types, wired the same way.

The local-cloud tests deploy it when they need a stack whose shape they control (a failing handler, a
short visibility timeout). Context: ``function_dir`` (code asset, default ``function/``), ``handler``,
``visibility_timeout`` (seconds), ``max_receive_count``, ``batch_size``, ``stack_name``, ``marker``
(an environment variable value, changed to prove that a redeploy updates the stack).
"""

from __future__ import annotations

import os
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs

HERE = Path(__file__).resolve().parent

app = cdk.App()
ctx = app.node.try_get_context


def _int(name: str, default: int) -> int:
    value = ctx(name)
    return default if value is None else int(value)


stack = cdk.Stack(
    app,
    ctx("stack_name") or "StandInPipeline",
    env=cdk.Environment(
        account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
    ),
)
topic = sns.Topic(stack, "Topic", fifo=True, content_based_deduplication=True)
dlq = sqs.Queue(stack, "DeadLetterQueue", fifo=True, queue_name=f"{stack.stack_name}-dlq.fifo")
queue = sqs.Queue(
    stack,
    "Queue",
    fifo=True,
    queue_name=f"{stack.stack_name}-queue.fifo",
    visibility_timeout=cdk.Duration.seconds(_int("visibility_timeout", 30)),
    dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=_int("max_receive_count", 3)),
)
topic.add_subscription(subs.SqsSubscription(queue, raw_message_delivery=True))
table = dynamodb.Table(
    stack,
    "Table",
    partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
    sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
    billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
    time_to_live_attribute="expires_at",
    removal_policy=cdk.RemovalPolicy.DESTROY,
)
function = lambda_.Function(
    stack,
    "Consumer",
    runtime=lambda_.Runtime.PYTHON_3_12,
    handler=ctx("handler") or "standin_handler.handler",
    code=lambda_.Code.from_asset(str(HERE / (ctx("function_dir") or "function"))),
    timeout=cdk.Duration.seconds(5),
    environment={
        "TABLE_NAME": table.table_name,
        "PARTITION_KEY_FIELD": "x",
        "SORT_KEY_FIELD": "y",
        "MARKER": str(ctx("marker") or "one"),
    },
)
table.grant_write_data(function)
function.add_event_source(
    sources.SqsEventSource(queue, batch_size=_int("batch_size", 10), report_batch_item_failures=True)
)
function.add_to_role_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[dlq.queue_arn]))
cdk.CfnOutput(stack, "TopicArn", value=topic.topic_arn)
app.synth()
