"""The contenders of the runtime benchmarks: our runtime per mode, and the Powertools peer.

A contender knows how to create its table (its own documented key schema), build a handler on a given
DynamoDB client, and which standing responses a Stubber must give for a run where every record is new.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmarks.powertools_peer import build_powertools_handler, create_powertools_table

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

MODES = ("document", "transaction", "guarded")

# The user processing functions the modes that need one run (see benchmarks/processors.py).
PROCESSOR_OF_MODE = {
    "transaction": "benchmarks.processors:ledger_append",
    "guarded": "benchmarks.processors:charge",
}

# What DynamoDB answers when every record is new: success with an empty body, per operation the mode uses.
NEW_RECORD_RESPONSES_OF_MODE: dict[str, dict[str, dict[str, Any]]] = {
    "document": {"put_item": {}},
    "transaction": {"transact_write_items": {}},
    "guarded": {"put_item": {}, "update_item": {}, "delete_item": {}},
}


class RuntimeUnavailable(RuntimeError):
    """Our runtime (or the mode asked for) is not importable in this checkout."""


@dataclass(frozen=True)
class Contender:
    """`make_client` creates the DynamoDB client exactly as the contender does when none is given to it."""

    name: str
    build: Callable[[str, Any], Handler]
    create_table: Callable[[Any, str], None]
    make_client: Callable[[], Any]
    new_record_responses: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def our_client() -> Any:
    """The runtime's own client (its botocore Config: standard retries, timeouts, pool size)."""
    try:
        from idempotent_runtime.clients import LazyClient
    except ImportError as error:
        raise RuntimeUnavailable(f"idempotent_runtime is not importable: {error}") from error
    return LazyClient("dynamodb")()


def powertools_client() -> Any:
    """What DynamoDBPersistenceLayer creates without a client: a new session's default client."""
    import boto3

    return boto3.session.Session().client("dynamodb")


def create_our_table(client: Any, table_name: str, **props: Any) -> None:
    """The table the constructs create: `pk`/`sk` strings, on-demand, TTL on `expires_at`; ``props``: more of
    CreateTable's (a stream)."""
    client.create_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
        **props,
    )
    client.update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )


def our_environment(mode: str, table_name: str) -> dict[str, str]:
    """The environment the constructs give the consumer function (docs/runtime-contract.md)."""
    env = {"TABLE_NAME": table_name, "IDEMPOTENCY_MODE": mode, "KEY_SOURCE": "fields"}
    if mode in PROCESSOR_OF_MODE:
        env["PROCESSOR"] = PROCESSOR_OF_MODE[mode]
    return env


def build_ours(mode: str, table_name: str, dynamodb_client: Any) -> Handler:
    try:
        from idempotent_runtime.config import Config
        from idempotent_runtime.flow import build_handler
    except ImportError as error:
        raise RuntimeUnavailable(f"idempotent_runtime is not importable: {error}") from error
    try:
        config = Config.from_env(our_environment(mode, table_name))
    except Exception as error:  # the runtime's ConfigurationError: a mode it does not implement yet
        raise RuntimeUnavailable(f"idempotent_runtime rejects mode {mode!r}: {error}") from error
    return build_handler(config, dynamodb_client=dynamodb_client)


def ours(mode: str) -> Contender:
    if mode not in MODES:
        raise ValueError(f"unknown idempotency mode {mode!r}; expected one of {MODES}")
    return Contender(
        name=f"ours ({mode})",
        build=lambda table_name, client: build_ours(mode, table_name, client),
        create_table=create_our_table,
        make_client=our_client,
        new_record_responses=NEW_RECORD_RESPONSES_OF_MODE[mode],
    )


POWERTOOLS = Contender(
    name="Powertools",
    build=lambda table_name, client: build_powertools_handler(table_name, dynamodb_client=client),
    create_table=create_powertools_table,
    make_client=powertools_client,
    new_record_responses={"put_item": {}, "update_item": {}},
)
