"""The publish and assert steps every integration test (``integ_*.py``) shares.

An app builds its pipeline with the library's public API and hands it to :func:`prove` with a
:class:`Scenario`. The steps are custom resources of the assertion stack (``@aws-cdk/integ-tests-alpha``),
each calling the AWS SDK, one after the other:

1. publish ``first``: new messages;
2. wait until the table holds ``items`` (the attributes listed, with exactly these values): the new messages
   are done;
3. publish ``then``: duplicates, a conflict, poison;
4. wait until each of ``dead_letters`` is in the pipeline's dead-letter queue with its reason, then until
   that queue holds exactly that many messages, all visible, and the source queue none (the duplicates
   were handled: deleted, not dead-lettered);
5. the table still holds ``items`` as they were (nothing in ``then`` changed them) and the subscription's
   dead-letter queue is empty (SNS delivered everything).

Every check waits (``wait_for_assertions``), so a check that never passes fails the assertion stack's
deployment after its timeout, whichever runner deploys it; it also leaves a failed ``AssertionResults``
output.

A dead-letter read returns one message: CloudFormation refuses a custom resource response over 4,096 bytes,
and one dead letter with its attributes is 0.9-1.4 KB (measured on moto, whose receipt handles are shorter
than SQS's), so three in one response could fail the step. The read hides the message it returns for as long
as reading all the others once takes, so the next read returns another one (a FIFO queue may otherwise
return the same group's head every time); each letter therefore needs a group of its own in the
dead-letter queue (:func:`prove` refuses a FIFO scenario without), and the depth check waits until they are
all visible again.

The scenario is plain data: ``tests/integ/test_integ_scenarios.py`` runs the same messages through the
runtime on moto and checks the same items and dead letters, so what a deployed test expects is what the
runtime does.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import Duration, RemovalPolicy
from aws_cdk.integ_tests_alpha import ExpectedResult, IntegTest, Match

from idempotent_pipeline import ConsumerOptions, IdempotentPipeline, MessagingOptions, TableOptions

# The first checks wait for the event source mapping of a fresh deployment to start polling (about a minute)
# and for a cold start; later checks pass on their first or second try.
FIRST_WAIT_MINUTES = 10
WAIT_MINUTES = 5
INTERVAL_SECONDS = 10


@dataclass(frozen=True)
class Message:
    """One message to publish to the pipeline's topic, exactly as written."""

    body: str
    # MessageGroupId: required by a FIFO topic; None on a standard topic.
    group: str | None = None
    # MessageDeduplicationId: None lets a FIFO topic deduplicate by content (the topic's default). A new id
    # for the same body is a producer resending after SNS's 5-minute deduplication window.
    dedup: str | None = None


@dataclass(frozen=True)
class Item:
    """An item the table must hold: its key, and attributes (a subset) as DynamoDB returns them."""

    key: Mapping[str, str]  # attribute name -> string value: {"pk": "o-1", "sk": "1"}
    attributes: Mapping[str, Mapping[str, Any]]  # {"quantity": {"N": "2"}}


@dataclass(frozen=True)
class DeadLetter:
    """A message the runtime must have sent to the dead-letter queue: its body unchanged, with a reason."""

    body: str
    reason: str  # a regular expression (JavaScript's and Python's alike) the idempotency.reason matches
    # fields of the idempotency.details JSON with their values: {"kind": "invalid"}
    details: Mapping[str, Any]


@dataclass(frozen=True)
class Scenario:
    first: Sequence[Message]
    then: Sequence[Message]
    items: Sequence[Item]
    dead_letters: Sequence[DeadLetter]


def publish_parameters(topic_arn: Any, message: Message) -> dict[str, Any]:
    """The SNS ``Publish`` request for ``message``."""
    parameters: dict[str, Any] = {"TopicArn": topic_arn, "Message": message.body}
    if message.group is not None:
        parameters["MessageGroupId"] = message.group
    if message.dedup is not None:
        parameters["MessageDeduplicationId"] = message.dedup
    return parameters


def get_item_parameters(table_name: Any, item: Item) -> dict[str, Any]:
    # Strongly consistent: a check right after a write sees it.
    key = {name: {"S": value} for name, value in item.key.items()}
    return {"TableName": table_name, "Key": key, "ConsistentRead": True}


def receive_parameters(queue_url: Any, letters: int) -> dict[str, Any]:
    """Read one message of a dead-letter queue holding ``letters``, hidden until every other one was read."""
    return {
        "QueueUrl": queue_url,
        "MaxNumberOfMessages": 1,
        "VisibilityTimeout": INTERVAL_SECONDS * letters,
        "WaitTimeSeconds": 1,  # long polling asks every SQS server: no message is missed for long
        "MessageAttributeNames": ["All"],
    }


def depth_parameters(queue_url: Any) -> dict[str, Any]:
    return {
        "QueueUrl": queue_url,
        "AttributeNames": ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    }


def dead_letter_pattern(letter: DeadLetter) -> dict[str, Any]:
    """What one dead letter in a ``ReceiveMessage`` response looks like (integ-tests-alpha ``Match``)."""
    return {
        "Body": letter.body,
        "MessageAttributes": {
            "idempotency.reason": {"StringValue": Match.string_like_regexp(letter.reason)},
            "idempotency.details": {
                "StringValue": Match.serialized_json(Match.object_like(dict(letter.details)))
            },
        },
    }


def build_test(
    app: cdk.App,
    name: str,
    pipeline_id: str,
    scenario: Scenario,
    consumer: ConsumerOptions,
    *,
    fifo: bool = True,
) -> None:
    """Stack ``IdempotentPipelineInteg<name>``: one pipeline ``pipeline_id`` and the scenario's steps. A
    test stack leaves nothing behind: the table, the dead-letter queues and the log group go with it."""
    stack = cdk.Stack(app, f"IdempotentPipelineInteg{name}")
    pipeline = IdempotentPipeline(
        stack,
        pipeline_id,
        messaging_options=MessagingOptions(fifo=fifo, dead_letter_removal_policy=RemovalPolicy.DESTROY),
        table_options=TableOptions(removal_policy=RemovalPolicy.DESTROY),
        consumer_options=consumer,
    )
    pipeline.consumer.log_group.apply_removal_policy(RemovalPolicy.DESTROY)
    prove(IntegTest(app, name, test_cases=[stack], stack_update_workflow=False), pipeline, scenario)


def prove(integ: IntegTest, pipeline: IdempotentPipeline, scenario: Scenario) -> None:
    """Add the scenario's steps to ``integ`` for ``pipeline`` (with a topic), each after the previous one."""
    if pipeline.topic is None or pipeline.subscription_dead_letter_queue is None:
        raise ValueError("the steps publish to the pipeline's topic: MessagingOptions(with_topic=True)")
    if pipeline.messaging.fifo:
        groups = {message.body: message.group for message in [*scenario.first, *scenario.then]}
        letter_groups = [groups.get(letter.body) for letter in scenario.dead_letters]
        if len(set(letter_groups)) < len(letter_groups):
            raise ValueError(f"each dead letter needs a message group of its own; got groups {letter_groups}")
    assertions = integ.assertions
    topic_arn = pipeline.topic.topic_arn
    table_name = pipeline.table.table_name
    steps: list[Any] = []

    def wait(call: Any, expected: Mapping[str, Any], minutes: int = WAIT_MINUTES) -> Any:
        return call.expect(ExpectedResult.object_like(dict(expected))).wait_for_assertions(
            total_timeout=Duration.minutes(minutes), interval=Duration.seconds(INTERVAL_SECONDS)
        )

    def publish(messages: Sequence[Message]) -> None:
        for message in messages:
            steps.append(assertions.aws_api_call("SNS", "publish", publish_parameters(topic_arn, message)))

    def items_held(minutes: int) -> None:
        for item in scenario.items:
            call = assertions.aws_api_call("DynamoDB", "getItem", get_item_parameters(table_name, item))
            held = {name: {"S": value} for name, value in item.key.items()} | dict(item.attributes)
            steps.append(wait(call, {"Item": held}, minutes))

    def depth(queue: Any, visible: int, in_flight: int | None = None) -> None:
        counts = {"ApproximateNumberOfMessages": str(visible)}
        if in_flight is not None:
            counts["ApproximateNumberOfMessagesNotVisible"] = str(in_flight)
        call = assertions.aws_api_call("SQS", "getQueueAttributes", depth_parameters(queue.queue_url))
        steps.append(wait(call, {"Attributes": counts}))

    publish(scenario.first)
    items_held(FIRST_WAIT_MINUTES)
    publish(scenario.then)
    letters = len(scenario.dead_letters)
    for letter in scenario.dead_letters:
        read = receive_parameters(pipeline.dead_letter_queue.queue_url, letters)
        call = assertions.aws_api_call("SQS", "receiveMessage", read)
        steps.append(wait(call, {"Messages": [Match.object_like(dead_letter_pattern(letter))]}))
    depth(pipeline.dead_letter_queue, letters, in_flight=0)
    depth(pipeline.queue, 0, in_flight=0)
    items_held(WAIT_MINUTES)
    depth(pipeline.subscription_dead_letter_queue, 0)

    for before, after in itertools.pairwise(steps):
        before.next(after)
