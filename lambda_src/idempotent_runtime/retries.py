"""The runtime's own retries of AWS calls: botocore's are off, so every attempt is started only while the
invocation has time left for it (see :mod:`idempotent_runtime.deadline`)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from idempotent_runtime import deadline
from idempotent_runtime.errors import TransientError, is_retryable

T = TypeVar("T")

MAX_ATTEMPTS = 4  # like botocore's standard mode: the first attempt and three retries
BASE_DELAY = 0.05
MAX_DELAY = 1.0
# An attempt is not started with less time than this left (a DynamoDB call takes a few ms; a connect and a
# TLS handshake to a new endpoint well under this).
MIN_ATTEMPT_SECONDS = 0.25


class OutOfTime(TransientError):
    """No time left in the invocation for another attempt."""


class Retrier:
    """``retrier(operation, **request)``: call, retrying the errors ``retryable`` accepts (by default
    :func:`~idempotent_runtime.errors.is_retryable`) with exponential backoff and jitter, while attempts and
    time remain.

    ``sleep`` is injected like the clock (tests pass one that returns at once or moves a fake clock).
    """

    def __init__(self, sleep: Callable[[float], None] = time.sleep) -> None:
        self.sleep = sleep

    def __call__(
        self,
        operation: Callable[..., T],
        /,
        *,
        attempts: int = MAX_ATTEMPTS,
        time_left: Callable[[], float | None] | None = None,
        retryable: Callable[[BaseException], bool] = is_retryable,
        **request: Any,
    ) -> T:
        """``time_left`` bounds the retries further (guarded completion: the owner's lease); the first
        attempt is bounded by the invocation only."""
        attempt = 0
        while True:
            attempt += 1
            left = deadline.seconds_left() if attempt == 1 else self.left(time_left)
            if left is not None and left < MIN_ATTEMPT_SECONDS:
                raise OutOfTime(
                    f"not attempted: {max(left, 0):.2f} s left in the invocation"
                    + (f" after {attempt - 1} attempt(s)" if attempt > 1 else "")
                )
            try:
                return operation(**request)
            except Exception as exc:
                if attempt >= attempts or not retryable(exc):
                    raise
                delay = backoff(attempt)
                left = self.left(time_left)
                if left is not None and left < delay + MIN_ATTEMPT_SECONDS:
                    raise
                self.sleep(delay)

    @staticmethod
    def left(time_left: Callable[[], float | None] | None) -> float | None:
        bounds = [deadline.seconds_left(), time_left() if time_left is not None else None]
        known = [bound for bound in bounds if bound is not None]
        return min(known) if known else None


def backoff(attempt: int) -> float:
    """Delay before retry ``attempt`` (1, 2, ...): exponential, capped, half of it random."""
    delay = min(MAX_DELAY, BASE_DELAY * 2 ** (attempt - 1))
    return delay / 2 + random.random() * delay / 2
