"""The alarms the blocks create: one helper, the thresholds of :class:`AlarmOptions` read once."""

from __future__ import annotations

import dataclasses
import re
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import jsii
from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from constructs import Construct, IValidation, Node
from idempotent_runtime.contract import METRICS_DIMENSION, ConfigurationError, IntRange, Seconds

from idempotent_pipeline import _compat, _keys
from idempotent_pipeline._rules import (
    TOKEN,
    Rule,
    boolean,
    duration,
    enforce,
    instance,
    options_of,
    read,
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
AGE = Seconds(low=60)  # AlarmOptions.max_message_age: at least a minute
COUNT = IntRange(low=1)  # AlarmOptions.failed_threshold


def _set_while_off(options: Any) -> list[str]:
    """The AlarmOptions other than ``enabled`` given another value than their default (a Duration by its
    :func:`seconds`: one only known at deploy time counts as given)."""

    def value(option: dataclasses.Field, given: Any) -> Any:
        duration = isinstance(option.default, Duration)
        return seconds(f"AlarmOptions.{option.name}", given) if duration else given

    return [
        option.name
        for option in dataclasses.fields(AlarmOptions)
        if option.name != "enabled"
        and value(option, getattr(options, option.name)) != value(option, option.default)
    ]


RULES: tuple[Rule[Alarms], ...] = (
    Rule(
        lambda a: not a.enabled and bool(_set_while_off(a.options)),
        lambda a: (
            f"AlarmOptions.{' and '.join(_set_while_off(a.options))} needs enabled=True: with the alarms "
            "off no alarm exists to use it; got it set with enabled=False"
        ),
    ),
    Rule(
        lambda a: a.failed_period_seconds < 60 or a.failed_period_seconds % 60,
        lambda a: (
            "AlarmOptions.failed_period must be a whole number of minutes; got "
            f"{a.failed_period_seconds} seconds"
        ),
    ),
    Rule(
        lambda a: a.failed_period_seconds * EVALUATION_PERIODS > MAX_EVALUATION_SECONDS,
        lambda a: (
            "AlarmOptions.failed_period must be at most 7 days (CloudWatch: period x evaluation "
            f"periods <= 604800 seconds); got {a.failed_period_seconds} seconds"
        ),
    ),
)

# Alarm topics whose policy and key were already taken care of (several blocks may share one topic).
_HANDLED_TOPICS: weakref.WeakSet[Any] = weakref.WeakSet()
# An SNS topic policy replaces SNS's default policy, which is what let CloudWatch publish: a topic policy
# without this statement (a TLS-only one, say) makes every alarm action fail.
CLOUDWATCH_PUBLISH_SID = "AllowCloudWatchAlarmsToPublish"
IMPORTED_ALARM_TOPIC_WARNING = "idempotent-pipeline:imported-alarm-topic"
NO_ALARM_ACTION_WARNING = "idempotent-pipeline:alarms-without-action"
IMPORTED_ALARM_TOPIC_STATEMENT = (
    'allow {"Service": "cloudwatch.amazonaws.com"} the action sns:Publish on the topic, with the conditions '
    '{"StringEquals": {"aws:SourceAccount": "<the alarms\' account>"}, "ArnLike": {"aws:SourceArn": '
    '"arn:<partition>:cloudwatch:<region>:<account>:alarm:*"}}'
)


class Counters:
    """A block whose function writes Embedded Metric Format counters (the consumer's ``contract.Metric``,
    the relay's ``RelayMetric``): ``metric(name)`` and the ``metric_*`` methods :func:`counter` declares."""

    COUNTERS: type[StrEnum]
    metrics_namespace: str
    _function_name: str

    def metric(self, metric_name: StrEnum | str, **options: Any) -> cloudwatch.Metric:
        """One of the function's counters for this function: Sum per minute unless ``options``
        (``cloudwatch.MetricOptions`` fields: period, statistic, label, ...) say otherwise."""
        options.setdefault("period", ONE_MINUTE)
        options.setdefault("statistic", "Sum")
        return cloudwatch.Metric(
            namespace=self.metrics_namespace,
            metric_name=self.COUNTERS(metric_name).value,
            dimensions_map={METRICS_DIMENSION: self._function_name},
            **options,
        )


def counter(name: StrEnum, doc: str) -> Callable[..., cloudwatch.IMetric]:
    """A ``metric_<name>(**options)`` method of a :class:`Counters` block."""

    def method(self: Counters, **options: Any) -> cloudwatch.IMetric:
        return self.metric(name, **options)

    method.__doc__ = doc
    return method


@dataclass(frozen=True)
class AlarmDefinition:
    """One alarm of a block, as data: its construct id (``FailedAlarm``, which also names the block's
    attribute ``failed_alarm``), the metric it watches (built only when the alarm is), the value from which
    it fires, and what it tells whoever it notifies."""

    id: str
    metric: Callable[[], cloudwatch.IMetric]
    threshold: float
    description: str

    @property
    def attribute(self) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.id).lower()


def dead_letters(queue: Any, id: str = "DeadLetterQueueAlarm", what: str = "") -> AlarmDefinition:
    """Messages waiting in a dead-letter queue."""
    return AlarmDefinition(
        id,
        lambda: queue.metric_approximate_number_of_messages_visible(period=ONE_MINUTE, statistic="Maximum"),
        1,
        what or "messages the pipeline could not process are waiting in the dead-letter queue",
    )


def message_age(queue: Any, threshold: float) -> AlarmDefinition:
    """The oldest message of the queue the consumer reads."""
    return AlarmDefinition(
        "MessageAgeAlarm",
        lambda: queue.metric_approximate_age_of_oldest_message(period=ONE_MINUTE, statistic="Maximum"),
        threshold,
        "the oldest message in the queue is older than expected: the consumer lags",
    )


@dataclass(frozen=True)
class Alarms:
    """:class:`AlarmOptions` as plain values, and the action every alarm of one block uses."""

    options: AlarmOptions
    enabled: bool
    action: cloudwatch.IAlarmAction | None
    max_message_age_seconds: Any  # whole seconds, or TOKEN
    failed_threshold_count: Any  # or TOKEN
    failed_period_seconds: Any  # or TOKEN

    @classmethod
    def read(cls, scope: Construct, options: AlarmOptions | None) -> Alarms:
        options = options_of("alarm_options", options, AlarmOptions)
        topic = instance("AlarmOptions.alarm_topic", options.alarm_topic, sns.ITopic, "an sns.ITopic")
        enabled = bool(boolean("AlarmOptions.enabled", options.enabled))
        alarms = cls(
            options=options,
            enabled=enabled,
            action=cloudwatch_actions.SnsAction(topic) if enabled and topic is not None else None,
            max_message_age_seconds=read("AlarmOptions.max_message_age", AGE, options.max_message_age)[0],
            failed_threshold_count=read("AlarmOptions.failed_threshold", COUNT, options.failed_threshold)[0],
            failed_period_seconds=seconds("AlarmOptions.failed_period", options.failed_period),
        )
        if enabled and alarms.failed_period_seconds is TOKEN:
            raise ConfigurationError(
                "AlarmOptions.failed_period must be known at synth: CDK needs a metric's period as a number "
                "to write the alarm; got a deploy-time token"
            )
        enforce(scope, RULES, alarms)
        if alarms.action is not None and topic not in _HANDLED_TOPICS:
            _HANDLED_TOPICS.add(topic)
            _allow_cloudwatch_to_publish(scope, topic)
            key = _compat.topic_key(topic)
            if key is not None:
                _keys.allow(scope, key, "the alarm topic's key", _keys.CLOUDWATCH_ALARMS)
        return alarms

    @property
    def max_message_age(self) -> float:
        """The message-age alarms' threshold: seconds, or the deploy-time number as it is."""
        if self.max_message_age_seconds is TOKEN:
            return float(self.options.max_message_age.to_seconds())
        return float(self.max_message_age_seconds)

    @property
    def failed_threshold(self) -> float:
        """A deploy-time threshold reaches the alarm as the token it is (TOKEN only skips the rules)."""
        if self.failed_threshold_count is TOKEN:
            return float(self.options.failed_threshold)
        return float(self.failed_threshold_count)

    def create(
        self, scope: Construct, definitions: Iterable[AlarmDefinition]
    ) -> tuple[cloudwatch.Alarm, ...]:
        """The alarms of a block (none when disabled), each also set as the block's attribute it names."""
        made, ids = [], []
        for definition in definitions if self.enabled else ():
            alarm = _Alarm(
                scope,
                definition.id,
                metric=definition.metric(),
                threshold=definition.threshold,
                evaluation_periods=EVALUATION_PERIODS,
                comparison_operator=AT_LEAST,
                treat_missing_data=NOT_BREACHING,
                alarm_description=definition.description,
            )
            if self.action is not None:
                alarm.add_alarm_action(self.action)
                alarm.add_ok_action(self.action)
            setattr(scope, definition.attribute, alarm)
            made.append(alarm)
            ids.append(definition.id)
        if made and self.action is None:  # with an action every alarm has one: nothing to check
            node = scope.node  # kept: the check names the block by its path (one round trip less)
            node.add_validation(_ActionsChecked(scope, node, tuple(zip(ids, made, strict=True))))
        return tuple(made)


# Alarms given an action (add_alarm_action), by the library or by the app: what _ActionsChecked reads.
_WIRED: weakref.WeakSet[Any] = weakref.WeakSet()


class _Alarm(cloudwatch.Alarm):
    """A block's alarm, which notes here when it is given an action: the check at synth then asks the CDK
    nothing (each question is a round trip to its Node process; asking every alarm made synth 1.3x slower).
    An action set through the escape hatch (``alarm.node.default_child.alarm_actions``) is not seen: the
    warning can be acknowledged."""

    def add_alarm_action(self, *actions: cloudwatch.IAlarmAction) -> None:
        _WIRED.add(self)
        super().add_alarm_action(*actions)


@jsii.implements(IValidation)
class _ActionsChecked:
    """At synth, after the app has wired everything (validation follows every change the app and its
    aspects make): warn once per block whose alarms notify nobody (no alarm action: neither
    AlarmOptions.alarm_topic nor one the app added with ``add_alarm_action``). A validation of the block,
    not an aspect: an aspect visits every construct below it, each visit a round trip."""

    def __init__(
        self, scope: Construct, node: Node, alarms: tuple[tuple[str, cloudwatch.Alarm], ...]
    ) -> None:
        self.scope, self.node, self.alarms = scope, node, alarms

    def validate(self) -> list[str]:
        silent = [name for name, alarm in self.alarms if alarm not in _WIRED]
        if silent:
            path = self.node.path
            warn(
                self.scope,
                NO_ALARM_ACTION_WARNING,
                f"{len(silent)} alarm(s) of {path} ({', '.join(silent)}) have no action: they fire in "
                "CloudWatch and notify nobody. Give them a topic someone subscribes to "
                "(AlarmOptions(alarm_topic=...)), or acknowledge this warning where the alarms are watched "
                "another way",
            )
        return []


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
