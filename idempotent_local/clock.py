"""The emulator's clock: this machine's time, moved ahead when a test or a user makes time pass.

Every service that keeps something for a while judges it by this clock: DynamoDB Streams keep a record 24
hours after it was written, an SQS FIFO queue remembers a deduplication id 5 minutes after its first send.
Moving the clock N seconds ahead (:meth:`Clock.advance`: the control API's ``POST clock``, ``local age``)
makes everything written so far N seconds older at once; what is written afterwards is new. Each service
says what the clock ages for it when it registers (``Service.ages``, :mod:`idempotent_local.emulator`), so
the command that ages it says what it aged. The clock goes forward only, and is forgotten with everything
else (``POST /moto-api/reset``, or the emulator's stop).
"""

from __future__ import annotations

import threading
import time


class Clock:
    """One emulator process's time: ``time.time()`` plus ``offset`` seconds."""

    def __init__(self) -> None:
        self.offset = 0.0
        self.ages: tuple[str, ...] = ()  # what moving it makes older, as the services registered
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` ahead; returns its new offset."""
        if seconds < 0:
            raise ValueError(f"a clock does not go back: advance_seconds {seconds:g} < 0")
        with self._lock:
            self.offset += seconds
            return self.offset

    def reset(self) -> None:
        self.offset = 0.0


CLOCK = Clock()

__all__ = ["CLOCK", "Clock"]
