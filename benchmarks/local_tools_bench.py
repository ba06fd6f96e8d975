"""The local cloud's tools with several stacks deployed: ``local output NAME --stack S`` (for scripts) and
``local status``, each run as a user runs it (the console script, a new process), timed from start to exit.

Three stacks of ``app.py`` with its two extra hops (``-c outbox=true``, a ``stack_name`` each) are deployed
into a fresh emulator with the real CDK CLI (about a minute each, not timed); then each command runs
``REPEATS`` times and the median is kept. Before the inventory request, ``local output`` read every stack's
template and checked every resource first: 2 min 56 s with three stacks.

    .venv/bin/python benchmarks/run.py --only local_tools --output-dir /tmp/bench   # this row alone
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.report import in_repo
from benchmarks.runtime_bench import BenchmarkError
from benchmarks.volume_bench import bootstrapped_emulator

STACKS = ("BenchOne", "BenchTwo", "BenchThree")
REPEATS = 7
TOOL = Path(sys.executable).with_name("idempotent-pipeline")


@dataclass(frozen=True)
class Timed:
    command: str
    samples_s: list[float]
    stacks: int
    resources: int

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "samples_s": [round(s, 3) for s in self.samples_s]}


def _timed(command: list[str], check: str) -> list[float]:
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        done = in_repo(command)
        samples.append(time.perf_counter() - start)
        if done.returncode != 0 or check not in done.stdout:
            raise BenchmarkError(
                f"{' '.join(command)} answered {done.returncode}: {done.stdout}{done.stderr}"
            )
    return samples


def measure() -> list[Timed]:
    """Deploy the three stacks into a fresh emulator, then time each command."""
    from idempotent_local.stacks import deployed_stacks

    with bootstrapped_emulator("local-tools-bench-") as (emulator, cdk, state):
        for name in STACKS:
            cdk.deploy((), ["--context", "outbox=true", "--context", f"stack_name={name}"])
        stacks = deployed_stacks(emulator)
        if sorted(s.name for s in stacks) != sorted(STACKS) or any(s.problems() for s in stacks):
            raise BenchmarkError(f"expected the three stacks deployed whole, found {stacks}")
        resources = sum(s.resources for s in stacks)
        checks = {  # each command, and what its output must hold
            f"local output TopicArn --stack {STACKS[1]}": "arn:aws:sns:",
            "local status": f"{STACKS[2]}: CREATE_COMPLETE",
        }
        return [
            Timed(
                command, _timed([str(TOOL), *command.split(), "--state-dir", str(state)], check), 3, resources
            )
            for command, check in checks.items()
        ]
