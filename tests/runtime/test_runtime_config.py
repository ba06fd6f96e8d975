"""Configuration from the environment: defaults, and clear errors naming the variable and the value."""

from __future__ import annotations

import importlib
import sys

import pytest
from idempotent_runtime.config import Config
from idempotent_runtime.errors import ConfigurationError


def test_defaults_follow_the_runtime_contract():
    config = Config.from_env({"TABLE_NAME": "t"})
    assert (config.partition_key, config.sort_key, config.ttl_attribute) == ("pk", "sk", "expires_at")
    assert config.ttl_seconds == 604800
    assert (config.mode, config.key_source) == ("document", "fields")
    assert (config.partition_key_field, config.sort_key_field) == ("x", "y")
    assert config.processor is None and config.dlq_url is None and config.lease_seconds is None
    assert config.max_workers == 10
    assert config.metrics_namespace == "IdempotentPipeline"
    assert config.log_level == "INFO"
    assert config.function_name == "local"


def test_every_variable_is_read():
    config = Config.from_env(
        {
            "TABLE_NAME": "t",
            "PARTITION_KEY": "id",
            "SORT_KEY": "kind",
            "TTL_ATTRIBUTE": "ttl",
            "TTL_SECONDS": "60",
            "IDEMPOTENCY_MODE": "guarded",
            "KEY_SOURCE": "dedup_id",
            "PARTITION_KEY_FIELD": "order",
            "SORT_KEY_FIELD": "line",
            "PROCESSOR": "shop.mail:send",
            "DLQ_URL": "https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo",
            "LEASE_SECONDS": "45",
            "MAX_WORKERS": "4",
            "METRICS_NAMESPACE": "Shop",
            "LOG_LEVEL": "debug",
            "AWS_LAMBDA_FUNCTION_NAME": "fn",
        }
    )
    assert config == Config(
        table_name="t",
        partition_key="id",
        sort_key="kind",
        ttl_attribute="ttl",
        ttl_seconds=60,
        mode="guarded",
        key_source="dedup_id",
        partition_key_field="order",
        sort_key_field="line",
        processor="shop.mail:send",
        dlq_url="https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo",
        lease_seconds=45,
        max_workers=4,
        metrics_namespace="Shop",
        log_level="DEBUG",
        function_name="fn",
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "TABLE_NAME is required, got None"),
        ({"TABLE_NAME": ""}, "TABLE_NAME is required, got ''"),
        ({"TABLE_NAME": "t", "IDEMPOTENCY_MODE": "exactly"}, "IDEMPOTENCY_MODE must be one of document, "),
        ({"TABLE_NAME": "t", "KEY_SOURCE": "uuid"}, "KEY_SOURCE must be one of fields, dedup_id, message_id"),
        ({"TABLE_NAME": "t", "TTL_SECONDS": "a week"}, "TTL_SECONDS must be a whole number, got 'a week'"),
        ({"TABLE_NAME": "t", "TTL_SECONDS": "-1"}, "TTL_SECONDS must be 0 (no expiry) or more, got -1"),
        ({"TABLE_NAME": "t", "MAX_WORKERS": "0"}, "MAX_WORKERS must be between 1 and 64, got 0"),
        ({"TABLE_NAME": "t", "LEASE_SECONDS": "0"}, "LEASE_SECONDS must be at least 1, got 0"),
        (
            {"TABLE_NAME": "t", "LOG_LEVEL": "loud"},
            "LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, got 'LOUD'",
        ),
        ({"TABLE_NAME": "t", "PROCESSOR": "no-colon"}, "PROCESSOR must look like 'package.module:function'"),
        (
            {"TABLE_NAME": "t", "IDEMPOTENCY_MODE": "guarded"},
            "PROCESSOR is required with IDEMPOTENCY_MODE=guarded",
        ),
        (
            {"TABLE_NAME": "t", "DLQ_URL": "dlq.fifo"},
            "DLQ_URL must be an sqs queue url (https://...), got 'dlq.fifo'",
        ),
        ({"TABLE_NAME": "t", "SORT_KEY": "pk"}, "must be three different attribute names"),
    ],
)
def test_invalid_environment_names_the_variable_and_value(env, message):
    with pytest.raises(ConfigurationError) as raised:
        Config.from_env(env)
    assert message in str(raised.value)


def test_empty_optional_variables_count_as_unset():
    config = Config.from_env({"TABLE_NAME": "t", "DLQ_URL": "", "LEASE_SECONDS": "", "PROCESSOR": ""})
    assert config.dlq_url is None and config.lease_seconds is None and config.processor is None


def _import_handler():
    sys.modules.pop("idempotent_runtime.handler", None)
    return importlib.import_module("idempotent_runtime.handler")


def test_handler_module_fails_the_cold_start_on_a_bad_environment(monkeypatch):
    monkeypatch.delenv("TABLE_NAME", raising=False)
    with pytest.raises(ConfigurationError, match="TABLE_NAME is required"):
        _import_handler()


def test_handler_module_fails_the_cold_start_on_an_unimportable_processor(monkeypatch):
    monkeypatch.setenv("TABLE_NAME", "t")
    monkeypatch.setenv("PROCESSOR", "no_such_module_here:run")
    with pytest.raises(ConfigurationError, match="PROCESSOR 'no_such_module_here:run': cannot import module"):
        _import_handler()
    monkeypatch.setenv("PROCESSOR", "runtime_examples:no_such_function")
    with pytest.raises(ConfigurationError, match="has no attribute 'no_such_function'"):
        _import_handler()


def test_handler_module_builds_the_handler_from_the_environment(monkeypatch, table):
    monkeypatch.setenv("TABLE_NAME", table)
    monkeypatch.setenv("IDEMPOTENCY_MODE", "guarded")
    monkeypatch.setenv("PROCESSOR", "runtime_examples:send_receipt")
    module = _import_handler()
    assert module.handler.config.mode == "guarded"
    assert module.handler({"Records": []}, None) == {"batchItemFailures": []}
    sys.modules.pop("idempotent_runtime.handler", None)
