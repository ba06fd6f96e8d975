"""One declaration per setting: what synth accepts the cold start accepts, as the same value, and what one
refuses the other refuses, in the same words (each in its own names)."""

from __future__ import annotations

import itertools
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Duration
from constructs_helpers import (
    build_consumer,
    cdk_json_context,
    env_of,
    needs_reference_app,
    new_stack,
    template_of,
)
from idempotent_runtime import contract
from idempotent_runtime.config import Config

import app as reference_app
from idempotent_pipeline import (
    AlarmOptions,
    ConfigurationError,
    ConsumerOptions,
    IdempotencyTable,
    IdempotentPipeline,
    Messaging,
    MessagingOptions,
    TableOptions,
)

HUGE = "9" * 5000  # more digits than Python turns into an int
# For every setting an option sets: values just inside and just outside its limits, and odd ones (empty,
# whitespace, huge, unicode), as the text of a context key and of the function's environment.
VALUES: dict[str, list[str]] = {
    "PARTITION_KEY": ["id", "pk ", " ", "", "sk", "idempotency:id", "ключ", "k" * 255],
    "SORT_KEY": ["line", "sk ", "pk", "idempotency:s", " "],
    "TTL_ATTRIBUTE": ["ttl", "pk", " ", "expires "],
    "DEDUP_TTL_SECONDS": ["0", "1", "never", "", "-1", "1.5", " 60 ", "٣", str(2**53 - 1), str(2**53)],
    "IDEMPOTENCY_MODE": [
        "document",
        "guarded",
        "transaction",
        "versioned",
        "Document",
        " document",
        "exactly",
        "",
    ],
    "KEY_SOURCE": ["fields", "message_id", "dedup_id", "body_sha256", "uuid", "fields "],
    "ON_CONFLICT": ["quarantine", "duplicate", "ignore", " duplicate"],
    "METRICS_NAMESPACE": ["Orders", "Orders ", " Orders", "a:b", "AWS/Lambda", "x" * 255, "x" * 256, "Über"],
    "DOCUMENT_TTL_SECONDS": ["0", "never", "Never", "86400", "-1", "a week", HUGE],
    "PARTITION_KEY_FIELD": ["order.id", "order.id ", "order..id", ".id", " ", "pk", "sk", "ключ"],
    "SORT_KEY_FIELD": ["line", "line.", "pk", "expires_at", "x"],
    "KEY_PREFIX": ["shop#", " ", "idempotency#a", "p" * 1024, "p" * 1025, "é" * 512, "é" * 513],
    "FINGERPRINT_FIELDS": ['["a"]', '["order.id", "amount"]', "[]", '["a", ""]', '["a..b"]', "[1]", "{}"],
    "FINGERPRINT_EXCLUDE": ["[]", '["sent_at"]', '["a."]', '"a"'],
    "PROCESSOR": ["orders:handle", "orders", "orders:handle ", " ", "a-b:c"],
    "LEASE_SECONDS": ["1", "900", "0", "-1", "x", " "],
    "LEASE_MARGIN_SECONDS": ["0", "10", "-1", HUGE],
    "VERSION_FIELD": ["v", "meta.updated_at", "x", "y", "pk", "expires_at.v", "idempotency:v", "v.", " "],
    "TOMBSTONE_TTL_SECONDS": ["0", "never", "86400", "1", "-1", "a week", HUGE],
    "MAX_WORKERS": ["1", "64", "0", "65", "-1", " 10 ", "1e3", "٣", HUGE],
    "LOG_LEVEL": ["debug", "INFO", "Warning", "loud", " INFO"],
    "MAX_RECEIVE_COUNT": ["1", "1000", "0", "1001", "x"],
}
# What a setting needs around it to be read at all (context keys, and the same as variables).
NEEDS: dict[str, dict[str, str]] = {
    "PARTITION_KEY_FIELD": {"sort_key_field": "line"},  # a pair: set together
    "SORT_KEY_FIELD": {"partition_key_field": "order_id"},
    "LEASE_SECONDS": {"mode": "guarded", "processor": "orders:handle"},
    "LEASE_MARGIN_SECONDS": {"mode": "guarded", "processor": "orders:handle"},
    "IDEMPOTENCY_MODE": {"processor": "orders:handle"},
    "VERSION_FIELD": {"mode": "versioned"},
    "TOMBSTONE_TTL_SECONDS": {"mode": "versioned", "version_field": "v"},
}
VARIABLE_OF_KEY = {
    "mode": "IDEMPOTENCY_MODE",
    "processor": "PROCESSOR",
    "version_field": "VERSION_FIELD",
    "partition_key_field": "PARTITION_KEY_FIELD",
    "sort_key_field": "SORT_KEY_FIELD",
}
_COUNT = itertools.count()


@pytest.fixture(scope="module")
def scope() -> cdk.Stack:
    """One stack for every case (cheap: nothing is synthesized)."""
    stack = new_stack("Agreement")
    return stack


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("code")
    (directory / "orders.py").write_text("def handle(message):\n    return None\n")
    return str(directory)


def _key_of(variable: contract.Variable) -> str:
    """The reference app's context key for the option that sets ``variable``."""
    block, option = (variable.option or "").split(".")
    (key,) = [
        name
        for name, key in reference_app.SETTINGS.items()
        if key.option == option and key.where == reference_app.BLOCKS[block]
    ]
    return key


def _in_variable_names(message: str) -> str:
    """A synth refusal in the variables' names: options and context keys become the variables they set."""
    names = {}
    for variable in contract.ENVIRONMENT:
        if variable.option is not None:
            names[variable.option] = variable.name
            names[f"context {_key_of(variable)}"] = variable.name
    for name in sorted(names, key=len, reverse=True):
        message = message.replace(name, names[name])
    return message


def synthesized(scope: cdk.Stack, context: dict[str, str], code: str) -> dict[str, str] | str:
    """The environment the constructs write for these context keys, or their refusal: the reference app's
    parse, then the blocks' checks and the consumer's resolve and validate, exactly as synth runs them."""
    n = next(_COUNT)
    from idempotent_pipeline import consumer

    try:
        settings = reference_app.settings_from({**context, "code_directory": code}.get)
        table = IdempotencyTable(scope, f"Table{n}", options=TableOptions(**settings["table"]))
        messaging = Messaging(scope, f"Messaging{n}", options=MessagingOptions(**settings["messaging"]))
        props = consumer._resolve(
            scope, messaging.queue, table, None, ConsumerOptions(**settings["consumer"]), None
        )
        consumer._validate(scope, props)
    except ConfigurationError as refusal:
        return _in_variable_names(str(refusal))
    return {name: value for name, value in props.environment.items() if not _deploy_time(value)}


def _deploy_time(value: str) -> bool:
    return "${Token[" in value


def cold_start(environment: dict[str, str]) -> Config | str:
    try:
        return Config.from_env({"TABLE_NAME": "orders", **environment})
    except ConfigurationError as refusal:
        return str(refusal)


CASES = [(name, text) for name, texts in VALUES.items() for text in texts]


def test_every_setting_an_option_sets_is_walked():
    assert set(VALUES) == {v.name for v in contract.ENVIRONMENT if v.option is not None}


@pytest.mark.parametrize(("name", "text"), CASES, ids=[f"{n}={t[:12]!r}" for n, t in CASES])
def test_synth_and_cold_start_agree(scope, code, name, text):
    variable = next(v for v in contract.ENVIRONMENT if v.name == name)
    needs = NEEDS.get(name, {})
    synth = synthesized(scope, {**needs, _key_of(variable): text}, code)
    cold = cold_start({**{VARIABLE_OF_KEY[k]: v for k, v in needs.items()}, name: text})
    if isinstance(synth, str) or isinstance(cold, str):
        assert synth == cold  # both refuse, in the same words
        return
    # Both accept: the environment synth wrote holds the value the cold start reads from the text.
    assert getattr(cold_start(synth), variable.field) == getattr(cold, variable.field)


# -- the drift the declarations removed: each of these failed before ---------------------------------------


def _environment(stack: cdk.Stack | None = None, table: TableOptions | None = None, **options: Any) -> dict:
    stack = stack or new_stack()
    build_consumer(stack, table=IdempotencyTable(stack, "Table", options=table), **options)
    return env_of(template_of(stack))


def _deployed(environment: dict[str, Any]) -> Config:
    """The cold start of a function with this environment (deploy-time names filled in)."""
    return Config.from_env({k: v if isinstance(v, str) else "orders" for k, v in environment.items()})


def test_zero_seconds_of_a_lifetime_is_never_on_both_sides():
    """The runtime's never is 0: a Duration of 0 seconds is that too, not a refusal."""
    environment = _environment(dedup_ttl=Duration.seconds(0), document_ttl=Duration.seconds(0))
    assert (environment["DEDUP_TTL_SECONDS"], environment["DOCUMENT_TTL_SECONDS"]) == ("0", "0")
    config = _deployed(environment)
    assert (config.dedup_ttl_seconds, config.document_ttl_seconds) == (contract.NEVER, contract.NEVER)


def test_never_is_one_word_for_the_reference_app_and_the_runtime():
    assert Config.from_env({"TABLE_NAME": "t", "DEDUP_TTL_SECONDS": "never"}).dedup_ttl_seconds == 0


def test_the_runtime_writes_metrics_where_the_alarms_read_them():
    stack = new_stack()
    environment = _environment(stack, metrics_namespace="Orders ")
    alarms = [r["Properties"] for r in template_of(stack).to_json()["Resources"].values()]
    namespaces = {a["Namespace"] for a in alarms if a.get("MetricName") == "failed"}
    assert namespaces == {"Orders "} and _deployed(environment).metrics_namespace == "Orders "


def test_key_fields_and_attribute_names_reach_the_runtime_as_given():
    """A name with a trailing space is another DynamoDB attribute or body field: the runtime must not strip
    it, or every write misses the table's key."""
    environment = _environment(
        table=TableOptions(partition_key_name="pk "), partition_key_field="order.id ", sort_key_field="line"
    )
    config = _deployed(environment)
    assert (config.partition_key, config.partition_key_field) == ("pk ", "order.id ")


def test_one_field_for_both_keys_works_on_both_sides():
    config = _deployed(_environment(partition_key_field="id", sort_key_field="id"))
    assert (config.partition_key_field, config.sort_key_field) == ("id", "id")


def test_a_blank_processor_is_refused_on_both_sides():
    with pytest.raises(ConfigurationError, match=r"^ConsumerOptions.processor must look like 'module:"):
        _environment(processor=" ")
    with pytest.raises(ConfigurationError, match=r"^PROCESSOR must look like 'module:function'"):
        Config.from_env({"TABLE_NAME": "t", "PROCESSOR": " "})


def test_a_lifetime_cdk_cannot_carry_exactly_is_refused_on_both_sides():
    with pytest.raises(ConfigurationError, match=r"^ConsumerOptions.dedup_ttl must be at most"):
        _environment(dedup_ttl=Duration.seconds(10**16))
    with pytest.raises(ConfigurationError, match=r"^DEDUP_TTL_SECONDS must be at most"):
        Config.from_env({"TABLE_NAME": "t", "DEDUP_TTL_SECONDS": str(10**16)})


def test_a_deploy_time_max_workers_reaches_the_function_as_a_reference():
    stack = new_stack()
    workers = cdk.CfnParameter(stack, "Workers", type="Number", default=4).value_as_number
    assert _environment(stack, max_workers=workers)["MAX_WORKERS"] == {"Ref": "Workers"}


@needs_reference_app
def test_an_empty_context_value_counts_as_unset_as_in_the_environment():
    app = reference_app.build_app({**cdk_json_context(), "nag": False, "mode": "", "max_workers": ""})
    stack = app.node.find_child(reference_app.DEFAULT_STACK_NAME)
    environment = env_of(template_of(stack))
    assert environment["IDEMPOTENCY_MODE"] == "document" and "MAX_WORKERS" not in environment


def test_the_pipeline_writes_what_its_options_say():
    """The composite takes the same path: a value only the declarations accept reaches its function."""
    stack = new_stack()
    IdempotentPipeline(
        stack,
        "Pipeline",
        consumer_options=ConsumerOptions(dedup_ttl=Duration.seconds(0), metrics_namespace="Orders "),
        alarm_options=AlarmOptions(),
    )
    environment = env_of(template_of(stack))
    assert (environment["DEDUP_TTL_SECONDS"], environment["METRICS_NAMESPACE"]) == ("0", "Orders ")
