"""Configuration from the environment: defaults, and clear errors naming the variable and the value."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import re
import sys
from pathlib import Path

import pytest
from idempotent_runtime import contract
from idempotent_runtime.config import Config
from idempotent_runtime.errors import ConfigurationError

CONTRACT_DOC = Path(__file__).resolve().parents[2] / "docs" / "runtime-contract.md"


def test_defaults_follow_the_runtime_contract():
    config = Config.from_env({"TABLE_NAME": "t"})
    assert (config.partition_key, config.sort_key, config.ttl_attribute) == ("pk", "sk", "expires_at")
    assert (config.dedup_ttl_seconds, config.document_ttl_seconds) == (604800, 0)
    assert (config.mode, config.key_source) == ("document", "fields")
    assert (config.partition_key_field, config.sort_key_field) == ("x", "y")
    assert config.processor is None and config.dlq_url is None and config.lease_seconds is None
    assert config.key_prefix == "" and config.on_conflict == "quarantine" and config.queue_type == "fifo"
    assert config.fingerprint_fields is None and config.fingerprint_exclude is None
    assert config.max_receive_count is None and config.lease_margin_seconds == 10
    assert config.max_workers == 10
    assert config.metrics_namespace == "IdempotentPipeline"
    assert config.log_level == "INFO"
    assert config.function_name == "local"


def test_every_default_is_the_contracts_default():
    config = Config.from_env({"TABLE_NAME": "t"})
    for variable in contract.ENVIRONMENT:
        if not variable.required:  # no default: unset
            assert getattr(config, variable.field) == variable.default, variable.name


def test_config_has_a_field_for_each_declared_variable_and_the_function_name():
    fields = {field.name for field in dataclasses.fields(Config)}
    assert fields == {variable.field for variable in contract.ENVIRONMENT} | {"function_name"}


def test_contract_doc_lists_every_environment_variable():
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", CONTRACT_DOC.read_text(), re.MULTILINE))
    assert {variable.name for variable in contract.ENVIRONMENT} <= documented


def test_contract_doc_names_each_variables_default():
    rows = {
        match.group(1): match.group(2)
        for match in re.finditer(
            r"^\| `([A-Z_]+)` \|[^|]*\|([^|]*)\|", CONTRACT_DOC.read_text(), re.MULTILINE
        )
    }
    for variable in contract.ENVIRONMENT:
        if variable.default:
            assert f"`{variable.default}`" in rows[variable.name], variable.name


def test_contract_doc_table_is_generated_from_the_declarations():
    spec = importlib.util.spec_from_file_location(
        "contract_table", CONTRACT_DOC.with_name("contract_table.py")
    )
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    committed = CONTRACT_DOC.read_text()
    assert generator.render(committed) == committed, (
        "docs/runtime-contract.md's environment table differs from the contract's declarations: run "
        "`.venv/bin/python docs/contract_table.py` and commit the result"
    )


def test_ttl_seconds_fails_the_cold_start_and_names_its_replacements():
    with pytest.raises(ConfigurationError) as raised:
        Config.from_env({"TABLE_NAME": "t", "TTL_SECONDS": "604800"})
    message = str(raised.value)
    assert "TTL_SECONDS is no longer read (got '604800')" in message
    assert "DEDUP_TTL_SECONDS" in message and "DOCUMENT_TTL_SECONDS" in message


def test_every_variable_is_read():
    config = Config.from_env(
        {
            "TABLE_NAME": "t",
            "PARTITION_KEY": "id",
            "SORT_KEY": "kind",
            "TTL_ATTRIBUTE": "ttl",
            "DEDUP_TTL_SECONDS": "60",
            "DOCUMENT_TTL_SECONDS": "86400",
            "IDEMPOTENCY_MODE": "guarded",
            "KEY_SOURCE": "message_id",  # dedup_id needs a FIFO queue
            "PARTITION_KEY_FIELD": "order.id",
            "SORT_KEY_FIELD": "line",
            "KEY_PREFIX": "shop#",
            "FINGERPRINT_EXCLUDE": '["sent_at", "meta.trace"]',
            "ON_CONFLICT": "duplicate",
            "PROCESSOR": "shop.mail:send",
            "DLQ_URL": "https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo",
            "MAX_RECEIVE_COUNT": "5",
            "QUEUE_TYPE": "standard",
            "LEASE_SECONDS": "45",
            "LEASE_MARGIN_SECONDS": "3",
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
        dedup_ttl_seconds=60,
        document_ttl_seconds=86400,
        mode="guarded",
        key_source="message_id",
        partition_key_field="order.id",
        sort_key_field="line",
        key_prefix="shop#",
        fingerprint_exclude=("sent_at", "meta.trace"),
        on_conflict="duplicate",
        processor="shop.mail:send",
        dlq_url="https://sqs.eu-west-1.amazonaws.com/1/dlq.fifo",
        max_receive_count=5,
        queue_type="standard",
        lease_seconds=45,
        lease_margin_seconds=3,
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
        (
            {"TABLE_NAME": "t", "DEDUP_TTL_SECONDS": "a week"},
            "DEDUP_TTL_SECONDS must be a whole number of seconds, 0 or never (never expire); got 'a week'",
        ),
        (
            {"TABLE_NAME": "t", "DOCUMENT_TTL_SECONDS": "-1"},
            "DOCUMENT_TTL_SECONDS must be at least 0 seconds; got -1 seconds",
        ),
        ({"TABLE_NAME": "t", "ON_CONFLICT": "ignore"}, "ON_CONFLICT must be one of quarantine, duplicate"),
        ({"TABLE_NAME": "t", "QUEUE_TYPE": "lifo"}, "QUEUE_TYPE must be one of fifo, standard; got 'lifo'"),
        (
            {"TABLE_NAME": "t", "MAX_RECEIVE_COUNT": "0"},
            "MAX_RECEIVE_COUNT must be between 1 and 1000; got 0",
        ),
        (
            {"TABLE_NAME": "t", "LEASE_MARGIN_SECONDS": "-1"},
            "LEASE_MARGIN_SECONDS must be at least 0 seconds; got -1 seconds",
        ),
        (
            {"TABLE_NAME": "t", "KEY_PREFIX": "idempotency#tenant"},
            "KEY_PREFIX must not begin with 'idempotency#'",
        ),
        (
            {"TABLE_NAME": "t", "PARTITION_KEY_FIELD": "order..id"},
            "PARTITION_KEY_FIELD: field path 'order..id'",
        ),
        (
            {"TABLE_NAME": "t", "FINGERPRINT_FIELDS": "amount"},
            "FINGERPRINT_FIELDS must be a JSON array of field paths",
        ),
        (
            {"TABLE_NAME": "t", "FINGERPRINT_EXCLUDE": '["a", ""]'},
            "FINGERPRINT_EXCLUDE: a field path must be",
        ),
        (
            {"TABLE_NAME": "t", "FINGERPRINT_FIELDS": '["a"]', "FINGERPRINT_EXCLUDE": '["b"]'},
            "FINGERPRINT_FIELDS and FINGERPRINT_EXCLUDE cannot both be set",
        ),
        (
            {"TABLE_NAME": "t", "TTL_ATTRIBUTE": "idempotency:ttl"},
            "TTL_ATTRIBUTE must be a non-empty attribute name, not beginning with 'idempotency:'",
        ),
        ({"TABLE_NAME": "t", "METRICS_NAMESPACE": "a:b"}, "METRICS_NAMESPACE must be 1 to 255 characters"),
        (
            {"TABLE_NAME": "t", "METRICS_NAMESPACE": "AWS/Lambda"},
            "not beginning with a space or with 'AWS/' (the namespaces of AWS services); got 'AWS/Lambda'",
        ),
        ({"TABLE_NAME": "t", "MAX_WORKERS": "0"}, "MAX_WORKERS must be between 1 and 64; got 0"),
        ({"TABLE_NAME": "t", "LEASE_SECONDS": "0"}, "LEASE_SECONDS must be at least 1 second; got 0 seconds"),
        (
            {"TABLE_NAME": "t", "LOG_LEVEL": "loud"},
            "LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR; got 'LOUD'",
        ),
        (
            {"TABLE_NAME": "t", "PROCESSOR": "no-colon"},
            "PROCESSOR must look like 'module:function' (e.g. 'orders:handle')",
        ),
        (
            {"TABLE_NAME": "t", "DLQ_URL": "dlq.fifo"},
            "DLQ_URL must be an sqs queue url (https://...); got 'dlq.fifo'",
        ),
        ({"TABLE_NAME": "t", "SORT_KEY": "pk"}, "must be three different attribute names"),
        (
            {"TABLE_NAME": "t", "KEY_SOURCE": "dedup_id", "QUEUE_TYPE": "standard"},
            "KEY_SOURCE 'dedup_id' needs a FIFO queue (a standard queue's messages carry no "
            "MessageDeduplicationId); got QUEUE_TYPE 'standard'",
        ),
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


def test_handler_module_fails_the_cold_start_on_dedup_id_keys_for_a_standard_queue(monkeypatch):
    monkeypatch.setenv("TABLE_NAME", "t")
    monkeypatch.setenv("KEY_SOURCE", "dedup_id")
    monkeypatch.setenv("QUEUE_TYPE", "standard")
    with pytest.raises(ConfigurationError, match="KEY_SOURCE 'dedup_id' needs a FIFO queue"):
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
    assert module.handler.config.mode == contract.Mode.GUARDED
    assert module.handler({"Records": []}, None) == {"batchItemFailures": []}
    sys.modules.pop("idempotent_runtime.handler", None)


def test_configuration_error_is_the_contracts_one_class():
    from idempotent_runtime import errors

    assert errors.ConfigurationError is contract.ConfigurationError


@pytest.mark.parametrize(
    "name, value",
    [
        ("PROCESSOR", "orders:handle\n"),
        ("METRICS_NAMESPACE", "Shop\n"),
        ("EMIT_TARGET_ARN", "arn:aws:sqs:eu-west-1:123456789012:next.fifo\n"),
        ("DLQ_URL", "https://sqs.eu-west-1.amazonaws.com/123456789012/dlq\n"),
    ],
)
def test_a_value_with_a_trailing_newline_is_refused_not_read_as_the_value_before_it(name, value):
    # Python's `$` matches before a trailing newline: each pattern must match the whole value.
    env = {"TABLE_NAME": "t", "IDEMPOTENCY_MODE": "transaction", "PROCESSOR": "orders:handle", name: value}
    with pytest.raises(ConfigurationError, match=f"^{name} must "):
        Config.from_env(env)
