"""The alarms the blocks create: one helper, the thresholds of :class:`AlarmOptions` read once."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from aws_cdk import Aws
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from constructs import Construct
from idempotent_runtime.contract import ConfigurationError

from idempotent_pipeline import _compat, _keys
from idempotent_pipeline._rules import (
    TOKEN,
    Rule,
    boolean,
    duration,
    enforce,
    instance,
    integer,
    options_of,
    seconds,
    warn,
)
from idempotent_pipeline.options import AlarmOptions

ONE_MINUTE = duration(60)
AT_LEAST = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
EVALUATION_PERIODS = 1  # every alarm here looks at one period
# PutMetricAlarm: Period x EvaluationPeriods can't be more than 604,800 seconds (7 days); under one hour per
# period the total is also capped at one day, which one evaluation period never reaches.
MAX_EVALUATION_SECONDS = 7 * 24 * 3600
NOT_BREACHING = cloudwatch.TreatMissingData.NOT_BREACHING

RULES = (
    Rule(
        ("max_message_age",),
        lambda age: age < 60,
        "AlarmOptions.max_message_age must be at least 60 seconds; got {max_message_age} seconds",
    ),
    Rule(
        ("failed_threshold",),
        lambda threshold: threshold < 1,
        "AlarmOptions.failed_threshold must be at least 1; got {failed_threshold}",
    ),
    Rule(
        ("failed_period",),
        lambda period: period < 60 or period % 60,
        "AlarmOptions.failed_period must be a whole number of minutes; got {failed_period} seconds",
    ),
    Rule(
        ("failed_period",),
        lambda period: period * EVALUATION_PERIODS > MAX_EVALUATION_SECONDS,
        "AlarmOptions.failed_period must be at most 7 days (CloudWatch: period x evaluation periods <= "
        "604800 seconds); got {failed_period} seconds",
    ),
)

# Alarm topics whose policy and key were already taken care of (several blocks may share one topic).
_HANDLED_TOPICS: weakref.WeakSet[Any] = weakref.WeakSet()
# An SNS topic policy replaces SNS's default policy, which is what let CloudWatch publish: a topic policy
# without this statement (a TLS-only one, say) makes every alarm action fail.
CLOUDWATCH_PUBLISH_SID = "AllowCloudWatchAlarmsToPublish"
IMPORTED_ALARM_TOPIC_WARNING = "idempotent-pipeline:imported-alarm-topic"
IMPORTED_ALARM_TOPIC_STATEMENT = (
    'allow {"Service": "cloudwatch.amazonaws.com"} the action sns:Publish on the topic, with the conditions '
    '{"StringEquals": {"aws:SourceAccount": "<the alarms\' account>"}, "ArnLike": {"aws:SourceArn": '
    '"arn:<partition>:cloudwatch:<region>:<account>:alarm:*"}}'
)


@dataclass(frozen=True)
class Alarms:
    """:class:`AlarmOptions` as plain values, and the action every alarm of one block uses."""

    enabled: bool
    action: cloudwatch.IAlarmAction | None
    max_message_age: float  # seconds (a number token when only known at deploy time)
    max_message_age_seconds: Any  # the same for the rules: whole seconds, or TOKEN
    failed_threshold: int | None
    failed_period: Any

    @classmethod
    def read(cls, scope: Construct, options: AlarmOptions | None) -> Alarms:
        options = options_of("alarm_options", options, AlarmOptions)
        values = {
            "max_message_age": seconds("AlarmOptions.max_message_age", options.max_message_age),
            "failed_threshold": integer("AlarmOptions.failed_threshold", options.failed_threshold),
            "failed_period": seconds("AlarmOptions.failed_period", options.failed_period),
        }
        topic = instance("AlarmOptions.alarm_topic", options.alarm_topic, sns.ITopic, "an sns.ITopic")
        enabled = bool(boolean("AlarmOptions.enabled", options.enabled))
        if enabled and values["failed_period"] is TOKEN:
            raise ConfigurationError(
                "AlarmOptions.failed_period must be known at synth: CDK needs a metric's period as a number "
                "to write the alarm; got a deploy-time token"
            )
        enforce(scope, RULES, values)
        action = None
        if enabled and topic is not None:
            action = cloudwatch_actions.SnsAction(topic)
            if topic not in _HANDLED_TOPICS:
                _HANDLED_TOPICS.add(topic)
                _allow_cloudwatch_to_publish(scope, topic)
                key = _compat.topic_key(topic)
                if key is not None:
                    _keys.allow_cloudwatch_alarms(scope, key, "the alarm topic's key")
        return cls(
            enabled=enabled,
            action=action,
            max_message_age=(
                options.max_message_age.to_seconds()
                if values["max_message_age"] is TOKEN
                else values["max_message_age"]
            ),
            max_message_age_seconds=values["max_message_age"],
            # A deploy-time threshold reaches the alarm as the token it is (TOKEN only skips the rules).
            failed_threshold=(
                options.failed_threshold
                if values["failed_threshold"] is TOKEN
                else values["failed_threshold"]
            ),
            failed_period=options.failed_period,
        )

    def alarm(
        self,
        scope: Construct,
        id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        description: str,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            scope,
            id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=EVALUATION_PERIODS,
            comparison_operator=AT_LEAST,
            treat_missing_data=NOT_BREACHING,
            alarm_description=description,
        )
        if self.action is not None:
            alarm.add_alarm_action(self.action)
            alarm.add_ok_action(self.action)
        return alarm


def _allow_cloudwatch_to_publish(scope: Construct, topic: sns.ITopic) -> None:
    """The topic policy statement CloudWatch needs to notify ``topic``, or for an imported topic (whose
    policy CDK cannot change) a warning naming it."""
    if not isinstance(topic, sns.Topic):
        warn(
            scope,
            IMPORTED_ALARM_TOPIC_WARNING,
            f"AlarmOptions.alarm_topic is an imported topic ({topic.topic_arn}): CDK cannot change its "
            f"policy. The policy must {IMPORTED_ALARM_TOPIC_STATEMENT}; without that every alarm action "
            "fails and alarms fire unseen",
        )
        return
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid=CLOUDWATCH_PUBLISH_SID,
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={
                "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                "ArnLike": {
                    "aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"
                },
            },
        )
    )
