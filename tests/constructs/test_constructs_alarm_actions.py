"""Alarms that notify nobody are a synth warning: every block whose alarms have no action says so, once,
naming them and the fix; the warning is acknowledgeable, and an action the app adds itself counts."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs_helpers import NO_ALARM_ACTION, cdk_json_context, warnings_of

from idempotent_pipeline import AlarmOptions, IdempotencyTable, IdempotentConsumer, IdempotentPipeline


def _stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(context=cdk_json_context()), "Alarms")


def _alarm_warnings(stack: cdk.Stack) -> dict[str, str]:
    return {path: text for path, text in warnings_of(stack) if NO_ALARM_ACTION in text}


def test_a_pipeline_without_an_alarm_topic_warns_once_per_block_naming_its_alarms_and_the_fix():
    stack = _stack()
    IdempotentPipeline(stack, "Orders")
    found = _alarm_warnings(stack)  # on main: no warning, every alarm fired into nothing
    assert sorted(found) == ["/Alarms/Orders/Consumer", "/Alarms/Orders/Messaging"]
    consumer = found["/Alarms/Orders/Consumer"]
    assert consumer.startswith("5 alarm(s) of Alarms/Orders/Consumer (FailedAlarm, QuarantinedAlarm,")
    assert "have no action: they fire in CloudWatch and notify nobody" in consumer
    assert "AlarmOptions(alarm_topic=...)" in consumer


def test_an_alarm_topic_silences_the_warning():
    stack = _stack()
    IdempotentPipeline(
        stack, "Orders", alarm_options=AlarmOptions(alarm_topic=sns.Topic(stack, "Alarms", enforce_ssl=True))
    )
    assert _alarm_warnings(stack) == {}


def test_disabled_alarms_do_not_warn():
    stack = _stack()
    IdempotentPipeline(stack, "Orders", alarm_options=AlarmOptions(enabled=False))
    assert _alarm_warnings(stack) == {}


@pytest.mark.parametrize("unpaged", [1, 0])
def test_an_action_the_app_adds_after_the_constructs_counts(unpaged):
    stack = _stack()
    table = IdempotencyTable(stack, "Table")
    queue = sqs.Queue(stack, "Queue", fifo=True, visibility_timeout=cdk.Duration.minutes(3), enforce_ssl=True)
    consumer = IdempotentConsumer(stack, "Consumer", queue=queue, table=table)
    topic = sns.Topic(stack, "Pager", enforce_ssl=True)
    paged = consumer.alarms[: len(consumer.alarms) - unpaged]
    for alarm in paged:
        alarm.add_alarm_action(actions.SnsAction(topic))
    found = _alarm_warnings(stack)
    if unpaged:
        (text,) = found.values()
        assert text.startswith(
            f"1 alarm(s) of Alarms/Consumer ({consumer.alarms[-1].node.id}) have no action"
        )
    else:
        assert found == {}


@pytest.mark.parametrize("scope", ["stack", "pipeline"])
def test_the_warning_is_acknowledged_for_a_scope_with_a_reason(scope):
    stack = _stack()
    pipeline = IdempotentPipeline(stack, "Orders")
    target = stack if scope == "stack" else pipeline
    cdk.Annotations.of(target).acknowledge_warning(NO_ALARM_ACTION, "watched on the team's dashboard")
    assert _alarm_warnings(stack) == {}
