"""Options that work only beside another are refused at synth when half set, naming the other; the key of one
body field (``key_source="field"``) reaches the function and keys messages as the runtime does."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sns as sns
from constructs_helpers import env_of, new_stack, template_of
from idempotent_runtime.config import Config
from idempotent_runtime.keys import KeyBuilder
from idempotent_runtime.message import Key, Message

from idempotent_pipeline import AlarmOptions, ConfigurationError, ConsumerOptions, IdempotentPipeline


def _pipeline(stack: cdk.Stack | None = None, **options) -> dict:
    stack = stack or new_stack()
    IdempotentPipeline(stack, "Pipeline", consumer_options=ConsumerOptions(**options))
    return env_of(template_of(stack))


@pytest.mark.parametrize(
    ("options", "other"),
    [
        ({"partition_key_field": "id"}, "sort_key_field None"),
        ({"sort_key_field": "line"}, "partition_key_field None"),
    ],
)
def test_a_key_field_without_the_other_is_refused_at_synth_naming_the_other(options, other):
    """The sort key field used to default to the placeholder 'y': every message went to the DLQ."""
    with pytest.raises(ConfigurationError) as raised:
        _pipeline(**options)
    message = str(raised.value)
    assert message.startswith(
        "ConsumerOptions.partition_key_field and ConsumerOptions.sort_key_field must be set together"
    )
    assert f"ConsumerOptions.{other}" in message and "; set the other one too" in message
    assert "or key each message by one field with ConsumerOptions.key_source 'field'" in message


def test_a_single_field_key_reaches_the_function_and_keys_as_the_runtime_does():
    environment = _pipeline(key_source="field", partition_key_field="customer.id", key_prefix="shop#")
    assert (environment["KEY_SOURCE"], environment["PARTITION_KEY_FIELD"]) == ("field", "customer.id")
    assert "SORT_KEY_FIELD" not in environment
    keys = ("KEY_SOURCE", "PARTITION_KEY_FIELD", "KEY_PREFIX")
    config = Config.from_env({"TABLE_NAME": "orders", **{name: environment[name] for name in keys}})
    body = json.dumps({"customer": {"id": "c-1"}, "plan": "gold"})
    assert KeyBuilder(config)(Message({"messageId": "m", "body": body})) == Key("shop#c-1", "customer.id")


def test_a_single_field_key_keys_the_entities_of_versioned_mode():
    environment = _pipeline(key_source="field", partition_key_field="id", mode="versioned", version_field="v")
    assert (environment["IDEMPOTENCY_MODE"], environment["VERSION_FIELD"]) == ("versioned", "v")


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        (
            {"key_source": "field"},
            "ConsumerOptions.key_source 'field' keys each message by one body field: "
            "ConsumerOptions.partition_key_field names it (e.g. 'id') and is required",
        ),
        (
            {"key_source": "field", "partition_key_field": "id", "sort_key_field": "line"},
            "ConsumerOptions.sort_key_field applies only to key_source 'fields'; got key_source 'field'",
        ),
        (
            {"key_source": "field", "partition_key_field": "id", "mode": "versioned", "version_field": "id"},
            "ConsumerOptions.version_field 'id' is one of the key fields",
        ),
        (
            {"key_source": "body_sha256", "fingerprint_exclude": ["sent_at"]},
            "ConsumerOptions.fingerprint_fields and ConsumerOptions.fingerprint_exclude do nothing with "
            "ConsumerOptions.key_source 'body_sha256'",
        ),
        (
            {"include": ["*.json"]},
            "ConsumerOptions.include needs code_directory (its patterns choose files of it); got ['*.json'] "
            "without one",
        ),
        ({"exclude": ["tests"]}, "ConsumerOptions.exclude needs code_directory"),
    ],
)
def test_options_that_work_only_beside_another_are_refused_when_half_set(options, refusal):
    with pytest.raises(ConfigurationError) as raised:
        _pipeline(**options)
    assert str(raised.value).startswith(refusal)


def test_an_alarm_topic_with_the_alarms_off_is_refused():
    stack = new_stack()
    topic = sns.Topic(stack, "Alarms")
    with pytest.raises(ConfigurationError, match=r"^AlarmOptions.alarm_topic needs enabled=True"):
        IdempotentPipeline(stack, "Pipeline", alarm_options=AlarmOptions(enabled=False, alarm_topic=topic))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"failed_threshold": 3}, "failed_threshold"),
        ({"max_message_age": cdk.Duration.minutes(30)}, "max_message_age"),
        (
            {"failed_threshold": 3, "failed_period": cdk.Duration.minutes(1)},
            "failed_threshold and failed_period",
        ),
    ],
)
def test_any_alarm_option_with_the_alarms_off_is_refused_not_ignored(options, named):
    with pytest.raises(ConfigurationError) as raised:
        IdempotentPipeline(new_stack(), "Pipeline", alarm_options=AlarmOptions(enabled=False, **options))
    assert str(raised.value) == (
        f"AlarmOptions.{named} needs enabled=True: with the alarms off no alarm exists to use it; got it set "
        "with enabled=False"
    )


@pytest.mark.parametrize(
    "defaults",
    [{}, {"max_message_age": cdk.Duration.minutes(10), "failed_period": cdk.Duration.seconds(300)}],
    ids=["alone", "with the defaults written out"],
)
def test_the_alarms_off_build_no_alarm(defaults):
    stack = new_stack()
    IdempotentPipeline(
        stack, "Pipeline", alarm_options=AlarmOptions(enabled=False, failed_threshold=10, **defaults)
    )
    assert template_of(stack).find_resources("AWS::CloudWatch::Alarm") == {}
