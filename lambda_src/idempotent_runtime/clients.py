"""boto3 clients, created once per execution environment on first use (boto3 is imported only then)."""

from __future__ import annotations

import threading
from typing import Any


class LazyClient:
    """Callable returning one shared low-level client; botocore clients are thread-safe once created."""

    def __init__(self, service: str, client: Any = None, *, max_pool_connections: int = 10) -> None:
        self.service = service
        self._client = client
        self._pool = max_pool_connections
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = _create(self.service, self._pool)
                client = self._client
        return client


def _create(service: str, max_pool_connections: int) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        # Throttling and 5xx are retried a few times in-call; beyond that the record is retried by SQS.
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=3,
        read_timeout=10,
        tcp_keepalive=True,
        max_pool_connections=max_pool_connections,
    )
    return boto3.client(service, config=config)
