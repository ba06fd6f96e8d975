"""The runtime's configuration, read from the environment variables of docs/runtime-contract.md."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from idempotent_runtime.errors import ConfigurationError

MODES = ("document", "transaction", "guarded")
KEY_SOURCES = ("fields", "dedup_id", "message_id", "body_sha256")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_PROCESSOR = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


@dataclass(frozen=True)
class Config:
    """Everything the consumer needs to know; build it with :meth:`from_env` or directly (tests, runners)."""

    table_name: str
    partition_key: str = "pk"
    sort_key: str = "sk"
    ttl_attribute: str = "expires_at"
    ttl_seconds: int = 604800
    mode: str = "document"
    key_source: str = "fields"
    partition_key_field: str = "x"
    sort_key_field: str = "y"
    processor: str | None = None
    dlq_url: str | None = None
    lease_seconds: int | None = None
    max_workers: int = 10
    metrics_namespace: str = "IdempotentPipeline"
    log_level: str = "INFO"
    function_name: str = "local"

    def __post_init__(self) -> None:
        _check_name("TABLE_NAME", self.table_name)
        for variable, value in (
            ("PARTITION_KEY", self.partition_key),
            ("SORT_KEY", self.sort_key),
            ("TTL_ATTRIBUTE", self.ttl_attribute),
            ("PARTITION_KEY_FIELD", self.partition_key_field),
            ("SORT_KEY_FIELD", self.sort_key_field),
            ("METRICS_NAMESPACE", self.metrics_namespace),
        ):
            _check_name(variable, value)
        if len({self.partition_key, self.sort_key, self.ttl_attribute}) != 3:
            raise ConfigurationError(
                "PARTITION_KEY, SORT_KEY and TTL_ATTRIBUTE must be three different attribute names, got "
                f"{self.partition_key!r}, {self.sort_key!r}, {self.ttl_attribute!r}"
            )
        if self.mode not in MODES:
            raise ConfigurationError(f"IDEMPOTENCY_MODE must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.key_source not in KEY_SOURCES:
            raise ConfigurationError(
                f"KEY_SOURCE must be one of {', '.join(KEY_SOURCES)}, got {self.key_source!r}"
            )
        if self.processor is not None and not _PROCESSOR.match(self.processor):
            raise ConfigurationError(
                f"PROCESSOR must look like 'package.module:function', got {self.processor!r}"
            )
        if self.dlq_url is not None and not self.dlq_url.startswith(("https://", "http://")):
            raise ConfigurationError(f"DLQ_URL must be an sqs queue url (https://...), got {self.dlq_url!r}")
        if self.ttl_seconds < 0:
            raise ConfigurationError(f"TTL_SECONDS must be 0 (no expiry) or more, got {self.ttl_seconds!r}")
        if self.lease_seconds is not None and self.lease_seconds < 1:
            raise ConfigurationError(f"LEASE_SECONDS must be at least 1, got {self.lease_seconds!r}")
        if not 1 <= self.max_workers <= 64:
            raise ConfigurationError(f"MAX_WORKERS must be between 1 and 64, got {self.max_workers!r}")
        if self.log_level not in LOG_LEVELS:
            raise ConfigurationError(
                f"LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {self.log_level!r}"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Config:
        """Parse the contract's variables; an empty optional variable counts as unset."""

        def get(name: str) -> str | None:
            value = env.get(name)
            return value if value not in (None, "") else None

        table_name = get("TABLE_NAME")
        if table_name is None:
            raise ConfigurationError(f"TABLE_NAME is required, got {env.get('TABLE_NAME')!r}")
        values: dict[str, object] = {"table_name": table_name}
        for field, variable in (
            ("partition_key", "PARTITION_KEY"),
            ("sort_key", "SORT_KEY"),
            ("ttl_attribute", "TTL_ATTRIBUTE"),
            ("mode", "IDEMPOTENCY_MODE"),
            ("key_source", "KEY_SOURCE"),
            ("partition_key_field", "PARTITION_KEY_FIELD"),
            ("sort_key_field", "SORT_KEY_FIELD"),
            ("processor", "PROCESSOR"),
            ("dlq_url", "DLQ_URL"),
            ("metrics_namespace", "METRICS_NAMESPACE"),
            ("function_name", "AWS_LAMBDA_FUNCTION_NAME"),
        ):
            value = get(variable)
            if value is not None:
                values[field] = value.strip()
        for field, variable in (
            ("ttl_seconds", "TTL_SECONDS"),
            ("lease_seconds", "LEASE_SECONDS"),
            ("max_workers", "MAX_WORKERS"),
        ):
            value = get(variable)
            if value is not None:
                values[field] = _integer(variable, value)
        level = get("LOG_LEVEL")
        if level is not None:
            values["log_level"] = level.strip().upper()
        config = cls(**values)  # type: ignore[arg-type]
        if config.processor is None and config.mode != "document":
            raise ConfigurationError(
                f"PROCESSOR is required with IDEMPOTENCY_MODE={config.mode}, got {env.get('PROCESSOR')!r}"
            )
        return config


def _integer(variable: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigurationError(f"{variable} must be a whole number, got {value!r}") from None


def _check_name(variable: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{variable} must be a non-empty string, got {value!r}")
