"""The runtime's configuration: the contract's variables (docs/runtime-contract.md), parsed and checked by
their declarations in :mod:`idempotent_runtime.contract`, every error naming the variable and the value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from idempotent_runtime import contract as c
from idempotent_runtime.contract import ConfigurationError, KeySource, LogLevel, Mode, OnConflict, QueueType


@dataclass(frozen=True)
class Config:
    """Everything the consumer needs to know; build it with :meth:`from_env` or directly (tests, runners):
    a field per variable of :data:`contract.ENVIRONMENT` (``mode`` is ``IDEMPOTENCY_MODE``), defaulting to
    its declaration. Enum fields accept their text; field path lists any sequence of dotted paths."""

    table_name: str
    partition_key: str = c.PARTITION_KEY.default
    sort_key: str = c.SORT_KEY.default
    ttl_attribute: str = c.TTL_ATTRIBUTE.default
    dedup_ttl_seconds: int = c.DEDUP_TTL_SECONDS.default
    mode: Mode = c.IDEMPOTENCY_MODE.default
    key_source: KeySource = c.KEY_SOURCE.default
    queue_type: QueueType = c.QUEUE_TYPE.default
    on_conflict: OnConflict = c.ON_CONFLICT.default
    metrics_namespace: str = c.METRICS_NAMESPACE.default
    document_ttl_seconds: int = c.DOCUMENT_TTL_SECONDS.default
    partition_key_field: str | None = None  # with sort_key_field, or neither: contract.key_fields
    sort_key_field: str | None = None
    key_prefix: str = c.KEY_PREFIX.default
    fingerprint_fields: tuple[str, ...] | None = None
    fingerprint_exclude: tuple[str, ...] | None = None
    processor: str | None = None
    dlq_url: str | None = None
    lease_seconds: int | None = None
    lease_margin_seconds: int = c.LEASE_MARGIN_SECONDS.default
    version_field: str | None = None
    tombstone_ttl_seconds: int = c.TOMBSTONE_TTL_SECONDS.default
    max_workers: int = c.MAX_WORKERS.default
    log_level: LogLevel = c.LOG_LEVEL.default
    max_receive_count: int | None = None
    emit_target_arn: str | None = None
    function_name: str = "local"

    def __post_init__(self) -> None:
        fields = c.key_fields(self.settings())
        for variable in c.KEY_FIELDS:
            object.__setattr__(self, variable.field, fields[variable.name])
        for variable in c.ENVIRONMENT:
            value = getattr(self, variable.field)
            defaulted = variable.default is not None and variable not in c.KEY_FIELDS
            if value is not None or defaulted or variable.required:
                object.__setattr__(self, variable.field, variable.coerce(value))
        settings = self.settings()
        del settings[c.PROCESSOR.name]  # a processor may still be given to build_handler, which checks
        c.check_settings(settings)

    def settings(self) -> dict[str, Any]:
        """The values by variable name, as the contract's cross-setting rules read them."""
        return {variable.name: getattr(self, variable.field) for variable in c.ENVIRONMENT}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Config:
        """Parse the contract's variables, each value as it is written; an empty one counts as unset."""
        for name, replacement in c.RETIRED_VARIABLES.items():
            if env.get(name):
                raise ConfigurationError(f"{name} is no longer read (got {env[name]!r}): {replacement}")
        if not env.get(c.TABLE_NAME.name):
            raise ConfigurationError(f"TABLE_NAME is required, got {env.get(c.TABLE_NAME.name)!r}")
        values = {v.field: v.parse(env[v.name]) for v in c.ENVIRONMENT if env.get(v.name)}
        return cls(**values, function_name=env.get("AWS_LAMBDA_FUNCTION_NAME") or "local")
