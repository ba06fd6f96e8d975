"""The terminal side: output streams, confirmation, the progress bar, the clock (all replaceable in tests)."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from idempotent_cli.errors import DlqError

# A run of at least this many messages (or a rate-limited one) shows a progress bar on a terminal.
LONG_RUN = 20
BAR_WIDTH = 30


def _stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


@dataclass
class Console:
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    ask: Callable[[str], str] = input
    interactive: Callable[[], bool] = _stdin_is_terminal
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def note(self, text: str) -> None:
        """A remark beside the output (stderr, so --json output stays JSON)."""
        print(text, file=self.err, flush=True)

    def confirm(self, question: str, *, yes: bool) -> None:
        """Go on only if ``--yes`` was given or the operator types yes; raise DlqError otherwise."""
        if yes:
            return
        if not self.interactive():
            raise DlqError(f"{question} Pass --yes to confirm (stdin is not a terminal)")
        answer = self.ask(f"{question} Type yes to continue: ")
        if answer.strip().lower() not in ("y", "yes"):
            raise DlqError("not confirmed: nothing was changed")


class Progress:
    """Per-message lines; on a terminal, for a long run, a bar under them that redraws in place."""

    def __init__(self, console: Console, total: int, label: str, *, long: bool = False) -> None:
        self.console, self.total, self.label = console, max(total, 0), label
        stream = console.out
        self.bar = bool(getattr(stream, "isatty", lambda: False)()) and (long or self.total >= LONG_RUN)
        self.done = 0
        self.counts: dict[str, int] = {}
        self._drawn = False

    def line(self, text: str) -> None:
        self._clear()
        self.console.print(text)
        self._draw()

    def step(self, outcome: str) -> None:
        self.done += 1
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        self._draw()

    def finish(self) -> None:
        self._clear()

    def _draw(self) -> None:
        if not self.bar:
            return
        total = max(self.total, self.done)
        filled = int(BAR_WIDTH * self.done / total) if total else BAR_WIDTH
        counts = ", ".join(f"{n} {name}" for name, n in sorted(self.counts.items()))
        self.console.out.write(
            f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{total} {self.label}"
            + (f" ({counts})" if counts else "")
        )
        self.console.out.flush()
        self._drawn = True

    def _clear(self) -> None:
        if self._drawn:
            self.console.out.write("\r\033[K")
            self._drawn = False


class Pace:
    """At most ``rate`` sends a second (None: as fast as SQS answers)."""

    def __init__(self, rate: float | None, console: Console) -> None:
        if rate is not None and not 0 < rate < math.inf:  # also nan, which no comparison holds for
            raise DlqError(f"--rate must be a finite number of messages a second over 0, got {rate:g}")
        self.interval = 1.0 / rate if rate else 0.0
        self.console = console
        self.next_at: float | None = None

    def wait(self) -> None:
        if not self.interval:
            return
        now = self.console.clock()
        if self.next_at is not None and now < self.next_at:
            self.console.sleep(self.next_at - now)
            now = self.next_at
        self.next_at = now + self.interval
