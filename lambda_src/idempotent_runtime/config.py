"""The runtime's configuration, read from the contract's environment variables (docs/runtime-contract.md).

Names, defaults, closed sets and ranges come from :mod:`idempotent_runtime.contract`; this module only parses
and checks them, naming the variable and the value received in every error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from idempotent_runtime import contract as c
from idempotent_runtime.contract import ConfigurationError, KeySource, LogLevel, Mode, OnConflict, QueueType


@dataclass(frozen=True)
class Config:
    """Everything the consumer needs to know; build it with :meth:`from_env` or directly (tests, runners).

    Field names follow the variables (``dedup_ttl_seconds`` is ``DEDUP_TTL_SECONDS``). Enum fields accept
    their text (``mode="guarded"``); field path lists accept any sequence of dotted paths.
    """

    table_name: str
    partition_key: str = c.DEFAULT_PARTITION_KEY
    sort_key: str = c.DEFAULT_SORT_KEY
    ttl_attribute: str = c.DEFAULT_TTL_ATTRIBUTE
    dedup_ttl_seconds: int = c.DEFAULT_DEDUP_TTL_SECONDS
    document_ttl_seconds: int = c.DEFAULT_DOCUMENT_TTL_SECONDS
    mode: Mode = Mode.DOCUMENT
    key_source: KeySource = KeySource.FIELDS
    partition_key_field: str = c.DEFAULT_PARTITION_KEY_FIELD
    sort_key_field: str = c.DEFAULT_SORT_KEY_FIELD
    key_prefix: str = ""
    fingerprint_fields: tuple[str, ...] | None = None
    fingerprint_exclude: tuple[str, ...] | None = None
    on_conflict: OnConflict = OnConflict.QUARANTINE
    processor: str | None = None
    dlq_url: str | None = None
    max_receive_count: int | None = None
    queue_type: QueueType = QueueType.FIFO
    lease_seconds: int | None = None
    lease_margin_seconds: int = c.DEFAULT_LEASE_MARGIN_SECONDS
    max_workers: int = c.DEFAULT_MAX_WORKERS
    metrics_namespace: str = c.DEFAULT_METRICS_NAMESPACE
    log_level: LogLevel = LogLevel.INFO
    function_name: str = "local"

    def __post_init__(self) -> None:
        _check_name(c.TABLE_NAME.name, self.table_name)
        for variable, value in (
            (c.PARTITION_KEY, self.partition_key),
            (c.SORT_KEY, self.sort_key),
            (c.TTL_ATTRIBUTE, self.ttl_attribute),
        ):
            _check_name(variable.name, value)
            if value.startswith(c.ATTRIBUTE_PREFIX):
                raise ConfigurationError(
                    f"{variable.name} must not begin with {c.ATTRIBUTE_PREFIX!r} (the runtime's own "
                    f"attributes), got {value!r}"
                )
        if len({self.partition_key, self.sort_key, self.ttl_attribute}) != 3:
            raise ConfigurationError(
                "PARTITION_KEY, SORT_KEY and TTL_ATTRIBUTE must be three different attribute names, got "
                f"{self.partition_key!r}, {self.sort_key!r}, {self.ttl_attribute!r}"
            )
        self._enum("mode", c.IDEMPOTENCY_MODE, Mode)
        self._enum("key_source", c.KEY_SOURCE, KeySource)
        self._enum("on_conflict", c.ON_CONFLICT, OnConflict)
        self._enum("queue_type", c.QUEUE_TYPE, QueueType)
        self._enum("log_level", c.LOG_LEVEL, LogLevel)
        for variable, value in (
            (c.PARTITION_KEY_FIELD, self.partition_key_field),
            (c.SORT_KEY_FIELD, self.sort_key_field),
        ):
            _path(variable.name, value)
        if not isinstance(self.key_prefix, str):
            raise ConfigurationError(f"KEY_PREFIX must be a string, got {self.key_prefix!r}")
        for name, variable in (
            ("fingerprint_fields", c.FINGERPRINT_FIELDS),
            ("fingerprint_exclude", c.FINGERPRINT_EXCLUDE),
        ):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _paths(variable.name, value))
        if self.fingerprint_fields is not None and not self.fingerprint_fields:
            raise ConfigurationError("FINGERPRINT_FIELDS must name at least one field, got []")
        if self.processor is not None and not c.PROCESSOR_PATTERN.match(self.processor):
            raise ConfigurationError(
                f"PROCESSOR must look like 'package.module:function', got {self.processor!r}"
            )
        if self.dlq_url is not None and not self.dlq_url.startswith(("https://", "http://")):
            raise ConfigurationError(f"DLQ_URL must be an sqs queue url (https://...), got {self.dlq_url!r}")
        for ttl_variable, seconds in (
            (c.DEDUP_TTL_SECONDS, self.dedup_ttl_seconds),
            (c.DOCUMENT_TTL_SECONDS, self.document_ttl_seconds),
        ):
            if not isinstance(seconds, int) or seconds < 0:
                raise ConfigurationError(
                    f"{ttl_variable.name} must be 0 (never expire) or a number of seconds, got {seconds!r}"
                )
        if self.lease_seconds is not None and self.lease_seconds < 1:
            raise ConfigurationError(f"LEASE_SECONDS must be at least 1, got {self.lease_seconds!r}")
        if self.lease_margin_seconds < 0:
            raise ConfigurationError(
                f"LEASE_MARGIN_SECONDS must be 0 or more, got {self.lease_margin_seconds!r}"
            )
        low, high = c.MAX_RECEIVE_COUNT_RANGE
        if self.max_receive_count is not None and not low <= self.max_receive_count <= high:
            raise ConfigurationError(
                f"MAX_RECEIVE_COUNT must be between {low} and {high}, got {self.max_receive_count!r}"
            )
        low, high = c.MAX_WORKERS_RANGE
        if not low <= self.max_workers <= high:
            raise ConfigurationError(
                f"MAX_WORKERS must be between {low} and {high}, got {self.max_workers!r}"
            )
        _check_name(c.METRICS_NAMESPACE.name, self.metrics_namespace)
        if not c.METRICS_NAMESPACE_PATTERN.match(self.metrics_namespace):
            raise ConfigurationError(
                "METRICS_NAMESPACE must be 1-255 characters without ':', not starting with a space or with "
                f"'AWS/' (the namespaces of AWS services), got {self.metrics_namespace!r}"
            )
        settings = self.settings()
        del settings[c.PROCESSOR.name]  # a processor may still be given to build_handler, which checks
        c.check_settings(settings)

    def settings(self) -> dict[str, Any]:
        """The values the contract's cross-setting rules read, by variable name (``check_settings``)."""
        return {
            c.IDEMPOTENCY_MODE.name: self.mode,
            c.KEY_SOURCE.name: self.key_source,
            c.QUEUE_TYPE.name: self.queue_type,
            c.PARTITION_KEY_FIELD.name: self.partition_key_field,
            c.SORT_KEY_FIELD.name: self.sort_key_field,
            c.KEY_PREFIX.name: self.key_prefix,
            c.PARTITION_KEY.name: self.partition_key,
            c.SORT_KEY.name: self.sort_key,
            c.TTL_ATTRIBUTE.name: self.ttl_attribute,
            c.FINGERPRINT_FIELDS.name: self.fingerprint_fields,
            c.FINGERPRINT_EXCLUDE.name: self.fingerprint_exclude,
            c.PROCESSOR.name: self.processor,
        }

    def _enum(self, field: str, variable: c.Variable, enum: type[StrEnum]) -> None:
        value = getattr(self, field)
        try:
            object.__setattr__(self, field, enum(value))
        except ValueError:
            choices = ", ".join(member.value for member in enum)
            raise ConfigurationError(f"{variable.name} must be one of {choices}, got {value!r}") from None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Config:
        """Parse the contract's variables; an empty optional variable counts as unset."""

        def get(variable: c.Variable | str) -> str | None:
            name = variable if isinstance(variable, str) else variable.name
            value = env.get(name)
            return value.strip() if isinstance(value, str) and value.strip() else None

        for name, replacement in c.RETIRED_VARIABLES.items():
            if get(name) is not None:
                raise ConfigurationError(f"{name} is no longer read (got {env.get(name)!r}): {replacement}")
        table_name = get(c.TABLE_NAME)
        if table_name is None:
            raise ConfigurationError(f"TABLE_NAME is required, got {env.get('TABLE_NAME')!r}")
        values: dict[str, Any] = {"table_name": table_name}
        text_fields: dict[str, c.Variable | str] = {
            "partition_key": c.PARTITION_KEY,
            "sort_key": c.SORT_KEY,
            "ttl_attribute": c.TTL_ATTRIBUTE,
            "mode": c.IDEMPOTENCY_MODE,
            "key_source": c.KEY_SOURCE,
            "partition_key_field": c.PARTITION_KEY_FIELD,
            "sort_key_field": c.SORT_KEY_FIELD,
            "on_conflict": c.ON_CONFLICT,
            "processor": c.PROCESSOR,
            "dlq_url": c.DLQ_URL,
            "queue_type": c.QUEUE_TYPE,
            "metrics_namespace": c.METRICS_NAMESPACE,
            "function_name": "AWS_LAMBDA_FUNCTION_NAME",
        }
        for field, variable in text_fields.items():
            value = get(variable)
            if value is not None:
                values[field] = value
        prefix = env.get(c.KEY_PREFIX.name)
        if prefix:  # not stripped: a prefix may end with a space on purpose
            values["key_prefix"] = prefix
        for field, variable in (
            ("dedup_ttl_seconds", c.DEDUP_TTL_SECONDS),
            ("document_ttl_seconds", c.DOCUMENT_TTL_SECONDS),
            ("max_receive_count", c.MAX_RECEIVE_COUNT),
            ("lease_seconds", c.LEASE_SECONDS),
            ("lease_margin_seconds", c.LEASE_MARGIN_SECONDS),
            ("max_workers", c.MAX_WORKERS),
        ):
            value = get(variable)
            if value is not None:
                values[field] = _integer(variable.name, value)
        for field, variable in (
            ("fingerprint_fields", c.FINGERPRINT_FIELDS),
            ("fingerprint_exclude", c.FINGERPRINT_EXCLUDE),
        ):
            value = get(variable)
            if value is not None:
                values[field] = _json_paths(variable.name, value)
        level = get(c.LOG_LEVEL)
        if level is not None:
            values["log_level"] = level.upper()
        return cls(**values)


def _integer(variable: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigurationError(f"{variable} must be a whole number, got {value!r}") from None


def _check_name(variable: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{variable} must be a non-empty string, got {value!r}")


def _path(variable: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, str):
        raise ConfigurationError(f"{variable} must be a field path such as order.id, got {value!r}")
    try:
        return c.field_path(value)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{variable}: {exc}") from None


def _paths(variable: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ConfigurationError(f"{variable} must be a list of field paths, got {value!r}")
    for item in value:
        _path(variable, item)
    return tuple(value)


def _json_paths(variable: str, text: str) -> tuple[str, ...]:
    try:
        value = json.loads(text)
    except ValueError:
        raise ConfigurationError(
            f'{variable} must be a JSON array of field paths such as ["order.id", "amount"], got {text!r}'
        ) from None
    return _paths(variable, value)
