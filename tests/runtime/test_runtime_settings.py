"""Settings that cannot work together are refused at cold start, before a message pays for them.

Each refused combination is also run with the check switched off, to show that it would fail valid messages:
a rule that refused a working configuration would be a defect of its own.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import pytest
from idempotent_runtime import contract
from idempotent_runtime.config import Config
from idempotent_runtime.errors import ConfigurationError
from idempotent_runtime.flow import build_handler
from runtime_helpers import drain, event, log_lines, record, scan

# The layout `idempotent-pipeline init` writes: the table's key attributes are the message's key fields.
INIT = {
    "partition_key": "order_id",
    "sort_key": "line_id",
    "partition_key_field": "order_id",
    "sort_key_field": "line_id",
}
LINE = {"order_id": "o-1", "line_id": "1", "sku": "tea", "quantity": 2}

# (settings, a valid message for them, the cold start's refusal)
REFUSED: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    (
        {**INIT, "key_prefix": "shop#"},
        LINE,
        "KEY_PREFIX 'shop#' cannot be used with PARTITION_KEY_FIELD 'order_id' in IDEMPOTENCY_MODE "
        "'document': the field is the table's partition key attribute (PARTITION_KEY), which holds the "
        "prefix + its value, so every message would be refused; rename the table's partition key (e.g. 'pk') "
        "or drop the prefix",
    ),
    (
        {"partition_key": "order", "partition_key_field": "order.id", "sort_key_field": "y"},
        {"order": {"id": "o-1"}, "y": "1"},
        "PARTITION_KEY_FIELD 'order.id' begins with 'order', the table's partition key attribute "
        "(PARTITION_KEY): in IDEMPOTENCY_MODE 'document' it holds the key's prefixed partition value, so "
        "messages would be refused for another value there; name the table's attributes apart from the "
        "message's fields",
    ),
    (
        {"sort_key": "line", "partition_key_field": "x", "sort_key_field": "line.no"},
        {"x": "o-1", "line": {"no": 7}},
        "SORT_KEY_FIELD 'line.no' begins with 'line', the table's sort key attribute (SORT_KEY): in "
        "IDEMPOTENCY_MODE 'document' it holds the key's sort value, so messages",
    ),
    (
        {
            "partition_key": "order_id",
            "sort_key": "line_id",
            "partition_key_field": "line_id",
            "sort_key_field": "order_id",
        },
        LINE,
        "PARTITION_KEY_FIELD 'line_id' begins with 'line_id', the table's sort key attribute (SORT_KEY)",
    ),
    (
        {"partition_key_field": "sk", "sort_key_field": "y"},
        {"sk": "o-1", "y": "1"},
        "PARTITION_KEY_FIELD 'sk' begins with 'sk', the table's sort key attribute (SORT_KEY)",
    ),
    (
        {"partition_key_field": "x", "sort_key_field": "pk"},
        {"x": "o-1", "pk": "1"},
        "SORT_KEY_FIELD 'pk' begins with 'pk', the table's partition key attribute (PARTITION_KEY)",
    ),
    (
        {"ttl_attribute": "expires", "partition_key_field": "x", "sort_key_field": "expires"},
        {"x": "o-1", "expires": "2030-01-01"},
        "SORT_KEY_FIELD 'expires' begins with 'expires', the table's TTL attribute (TTL_ATTRIBUTE): in "
        "IDEMPOTENCY_MODE 'document' it holds the document's expiry",
    ),
    (
        {"document_ttl_seconds": 3600, "partition_key_field": "expires_at", "sort_key_field": "y"},
        {"expires_at": "o-1", "y": "1"},
        "PARTITION_KEY_FIELD 'expires_at' begins with 'expires_at', the table's TTL attribute",
    ),
    (
        {"partition_key_field": "expires_at.id", "sort_key_field": "y"},
        {"expires_at": {"id": "o-1"}, "y": "1"},
        "PARTITION_KEY_FIELD 'expires_at.id' begins with 'expires_at', the table's TTL attribute",
    ),
    (
        {"partition_key_field": "order", "sort_key_field": "order.id"},
        {"order": {"id": "o-1"}},
        "PARTITION_KEY_FIELD 'order' and SORT_KEY_FIELD 'order.id': one field lies inside the other, so no "
        "body holds both (a key or a version is a string, number or boolean, not an object) and every "
        "message would be refused; name two separate fields",
    ),
    (
        {"partition_key_field": "order.line.no", "sort_key_field": "order.line"},
        {"order": {"line": {"no": "1"}}},
        "PARTITION_KEY_FIELD 'order.line.no' and SORT_KEY_FIELD 'order.line': one field lies inside",
    ),
    (
        {
            "mode": "versioned",
            "version_field": "order",
            "partition_key_field": "order.id",
            "sort_key_field": "y",
        },
        {"order": {"id": "o-1"}, "y": "1"},
        "VERSION_FIELD 'order' and PARTITION_KEY_FIELD 'order.id': one field lies inside the other",
    ),
    (
        {
            "mode": "versioned",
            "version_field": "line.v",
            "partition_key_field": "x",
            "sort_key_field": "line",
        },
        {"x": "o-1", "line": {"v": 2}},
        "VERSION_FIELD 'line.v' and SORT_KEY_FIELD 'line': one field lies inside the other",
    ),
    (
        {"partition_key_field": "idempotency:order", "sort_key_field": "y"},
        {"idempotency:order": "o-1", "y": "1"},
        "PARTITION_KEY_FIELD 'idempotency:order' begins with 'idempotency:', the runtime's attribute names: "
        "in IDEMPOTENCY_MODE 'document' every message would be refused",
    ),
]


@pytest.mark.parametrize(("settings", "body", "refusal"), REFUSED)
def test_settings_that_fail_every_message_are_refused_at_cold_start(settings, body, refusal):
    with pytest.raises(ConfigurationError) as raised:
        Config(table_name="t", **settings)
    assert str(raised.value).startswith(refusal)


def _unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    from idempotent_runtime import flow

    for module in (contract, flow):
        monkeypatch.setattr(module, "check_settings", lambda *args, **kwargs: None)


def _table(dynamodb, name: str, settings: dict[str, Any]) -> str:
    keys = (settings.get("partition_key", "pk"), settings.get("sort_key", "sk"))
    dynamodb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"} for key in keys],
        KeySchema=[
            {"AttributeName": keys[0], "KeyType": "HASH"},
            {"AttributeName": keys[1], "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def init_processor(message):
    """What `idempotent-pipeline init`'s processor does: the line as it came, with its total."""
    line = message.json_object()
    return {**line, "total_cents": 900}


@pytest.mark.parametrize("processor", [None, init_processor])
@pytest.mark.parametrize(("settings", "body", "refusal"), REFUSED)
def test_each_refused_setting_would_fail_a_valid_message(
    monkeypatch, dynamodb, sqs, dlq_url, settings, body, refusal, processor
):
    """With the check switched off the valid message the settings describe is quarantined, as every such
    message was before the check - whether the body is stored or a processor returns it as init's does: the
    rule refuses a configuration that cannot work, not one that merely looks odd."""
    _unchecked(monkeypatch)
    table = _table(dynamodb, "orders", settings)
    config = Config(table_name=table, dlq_url=dlq_url, **settings)
    handler = build_handler(config, dynamodb_client=dynamodb, sqs_client=sqs, processor=processor)
    (result,) = handler.process_batch(event(record(body)), None)
    assert result.outcome == "quarantined", result
    assert scan(dynamodb, table) == []
    (dead,) = drain(sqs, dlq_url)
    assert dead["Body"] == json.dumps(body)


HALF_SET = {
    "a partition key field alone": (
        {"PARTITION_KEY_FIELD": "id"},
        "PARTITION_KEY_FIELD and SORT_KEY_FIELD must be set together (KEY_SOURCE 'fields' reads both "
        "from every body, and no body holds a placeholder's field): got PARTITION_KEY_FIELD 'id' and "
        "SORT_KEY_FIELD None; set the other one too, or key each message by one field with KEY_SOURCE "
        "'field' and PARTITION_KEY_FIELD alone",
    ),
    "a sort key field alone": (
        {"SORT_KEY_FIELD": "line"},
        "PARTITION_KEY_FIELD and SORT_KEY_FIELD must be set",
    ),
    "one field without its field": (
        {"KEY_SOURCE": "field"},
        "KEY_SOURCE 'field' keys each message by one body field: PARTITION_KEY_FIELD names it (e.g. "
        "'id') and is required",
    ),
    "one field and a sort key field": (
        {"KEY_SOURCE": "field", "PARTITION_KEY_FIELD": "id", "SORT_KEY_FIELD": "line"},
        "SORT_KEY_FIELD applies only to KEY_SOURCE 'fields'; got KEY_SOURCE 'field'",
    ),
    "a fingerprint option of a body hash": (
        {"KEY_SOURCE": "body_sha256", "FINGERPRINT_EXCLUDE": '["sent_at"]'},
        "FINGERPRINT_FIELDS and FINGERPRINT_EXCLUDE do nothing with KEY_SOURCE 'body_sha256'",
    ),
}


@pytest.mark.parametrize(("environment", "refusal"), HALF_SET.values(), ids=HALF_SET.keys())
def test_half_set_options_are_refused_at_cold_start_naming_the_other(environment, refusal):
    """A key field without the other used to read the placeholder 'y' (or 'x') from every body: every
    message went to the DLQ."""
    with pytest.raises(ConfigurationError) as raised:
        Config.from_env({"TABLE_NAME": "orders", **environment})
    assert str(raised.value).startswith(refusal)


def test_a_single_field_key_is_accepted_with_its_field_alone():
    config = Config.from_env({"TABLE_NAME": "orders", "KEY_SOURCE": "field", "PARTITION_KEY_FIELD": "id"})
    assert (config.key_source, config.partition_key_field, config.sort_key_field) == ("field", "id", None)


def test_a_key_prefix_leaves_half_the_partition_key_to_the_keys_own_value():
    with pytest.raises(ConfigurationError) as raised:
        Config(table_name="t", key_prefix="p" * 1025)
    assert str(raised.value).startswith("KEY_PREFIX must be at most 1024 bytes of UTF-8; got 'pppp")
    with pytest.raises(ConfigurationError, match="KEY_PREFIX must be at most 1024 bytes"):
        Config(table_name="t", key_prefix="shop\ud800#")  # no UTF-8 form: no key could be written


@pytest.mark.parametrize(
    "settings",
    [
        INIT,  # the init layout without a prefix: the field and the attribute hold the same value
        {**INIT, "key_prefix": "shop#", "mode": "transaction", "processor": "runtime_examples:apply_payment"},
        {**INIT, "key_prefix": "shop#", "key_source": "message_id"},
        {"partition_key_field": "pk", "sort_key_field": "sk"},
        {"partition_key_field": "order.pk", "sort_key_field": "line.sk"},
        {"partition_key_field": "order.id", "sort_key_field": "order.idx"},  # a prefix of the text only
        {"partition_key_field": "order", "sort_key_field": "order"},  # one field for both keys
        {
            "partition_key_field": "order",
            "sort_key_field": "order.id",
            "key_source": "message_id",
        },  # not read
        {"key_prefix": "p" * 1024},
    ],
)
def test_settings_that_work_are_accepted(settings):
    Config(table_name="t", **settings)


def test_a_mode_that_runs_code_needs_a_processor_at_cold_start(table):
    with pytest.raises(ConfigurationError) as raised:
        build_handler(Config(table_name=table, mode="guarded"))
    assert str(raised.value) == "PROCESSOR is required with IDEMPOTENCY_MODE 'guarded'"
    build_handler(Config(table_name=table, mode="guarded"), processor=lambda message: None)


def _import_handler():
    sys.modules.pop("idempotent_runtime.handler", None)
    return importlib.import_module("idempotent_runtime.handler")


def test_the_cold_start_writes_its_refusal_as_one_error_line_and_fails(monkeypatch, capsys):
    for name, value in {"TABLE_NAME": "orders", **{k.upper(): v for k, v in INIT.items()}}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KEY_PREFIX", "shop#")
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-consumer")
    with pytest.raises(ConfigurationError) as raised:
        _import_handler()
    (line,) = [line for line in log_lines_of(capsys.readouterr().out)]
    assert line["level"] == "ERROR" and line["function"] == "orders-consumer"
    assert line["error"] == str(raised.value)
    assert line["error"].startswith("KEY_PREFIX 'shop#' cannot be used with PARTITION_KEY_FIELD 'order_id'")
    sys.modules.pop("idempotent_runtime.handler", None)


def log_lines_of(text: str) -> list[dict[str, Any]]:
    import io

    return log_lines(io.StringIO(text))
