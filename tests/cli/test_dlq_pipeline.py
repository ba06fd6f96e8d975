"""End to end with the real thing: the reference stack deployed into the local emulator by the CDK CLI, its
demo traffic run through the deployed function by the event-source runner, and the DLQ tool with --local
working on what the runtime dead-lettered: list, show, dry run, redrive, --force, purge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dlq_helpers import Terminal, command, dlq

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

if not (ROOT / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


@dataclass
class Deployed:
    app_dir: Path
    emulator: Any
    pipeline: Any  # idempotent_local.demo.Pipeline
    report: Any  # the demo's report

    def dlq(self, *argv: str, terminal: Terminal | None = None) -> tuple[int, Terminal]:
        state_dir = str(self.app_dir / ".local-cloud")
        return dlq(*argv, "--local", "--state-dir", state_dir, terminal=terminal)

    def drain(self) -> None:
        from idempotent_local.runner import EventSourceRunner

        with EventSourceRunner(self.emulator, retry_delay=1) as runner:
            runner.drain(timeout=120, mappings=[self.pipeline.mapping])

    def item(self, body: dict[str, Any]) -> dict[str, Any] | None:
        key = {
            self.pipeline.partition_key: {"S": body[self.pipeline.partition_key_field]},
            self.pipeline.sort_key: {"S": body[self.pipeline.sort_key_field]},
        }
        return (
            self.emulator.client("dynamodb")
            .get_item(TableName=self.pipeline.table_name, Key=key, ConsistentRead=True)
            .get("Item")
        )


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    from idempotent_local import emulator as emulators
    from idempotent_local.cli import main as local
    from idempotent_local.demo import find_pipelines, run_demo
    from idempotent_local.runner import EventSourceRunner

    app_dir = tmp_path_factory.mktemp("app")  # where --local finds the emulator (its .local-cloud/)
    state_dir = app_dir / emulators.DEFAULT_STATE_DIR
    output = tmp_path_factory.mktemp("cdk.out")
    try:
        status = local(
            [
                "deploy",
                "--state-dir",
                str(state_dir),
                "--app-dir",
                str(ROOT),
                "--output",
                str(output),
                "--no-demo",
            ]
        )
        assert status == 0
        emulator = emulators.find(state_dir)
        assert emulator is not None
        with EventSourceRunner(emulator) as runner:
            [pipeline] = find_pipelines(emulator, runner)
        report = run_demo(emulator, pipeline=pipeline)
        yield Deployed(app_dir, emulator, pipeline, report)
    finally:
        emulators.stop(state_dir)


def _dead_letters(deployed: Deployed) -> list[dict[str, Any]]:
    code, terminal = deployed.dlq("list", "--messages", "--json")
    assert code == 0, terminal.error
    return json.loads(terminal.out.getvalue())["message_list"]


def test_list_and_show_what_the_runtime_dead_lettered(deployed: Deployed) -> None:
    letters = _dead_letters(deployed)
    # The demo's poison message, and its republished keys with new content (conflicts, quarantined).
    kinds = sorted(letter["kind"] for letter in letters)
    assert kinds == ["conflict"] * (len(letters) - 1) + ["invalid"]
    assert len(letters) == deployed.report.dead_lettered

    poison = next(letter for letter in letters if letter["kind"] == "invalid")
    code, terminal = deployed.dlq("show", poison["message_id"])
    assert code == 0, terminal.error
    assert f"source message id  {poison['source_message_id']}" in terminal.out.getvalue()
    assert "this is not JSON" in terminal.out.getvalue()


def test_trace_and_logs_find_a_conflict_the_runner_dead_lettered(deployed: Deployed) -> None:
    conflict = next(letter for letter in _dead_letters(deployed) if letter["kind"] == "conflict")
    shown = _shown(deployed, conflict["message_id"])
    key = shown["details"]["key"]
    local = ("--local", "--state-dir", str(deployed.app_dir / ".local-cloud"))

    code, terminal = command("trace", "--body", shown["body"], *local, "--json")
    assert code == 0, terminal.error
    traced = json.loads(terminal.out.getvalue())
    assert (traced["key"]["partition"], traced["key"]["sort"]) == (key["partition"], key["sort"])
    assert traced["table"]["state"] == "conflict"  # the key holds the first revision
    assert [(d["queue"], d["kind"], d["message_id"]) for d in traced["dead_letters"]] == [
        ("dlq", "conflict", conflict["message_id"])
    ]

    # The line the deployed function wrote when it quarantined the message, as the runner saved it.
    code, terminal = command("logs", *local, "--key", traced["key"]["text"], "--json")
    assert code == 0, terminal.error
    lines = [json.loads(line) for line in terminal.out.getvalue().splitlines()]
    assert [(line["outcome"], line["kind"], line["message_id"]) for line in lines] == [
        ("quarantined", "conflict", conflict["source_message_id"])
    ]


def test_dry_run_then_force_makes_the_new_revisions_win_exactly_once(deployed: Deployed) -> None:
    conflicts = [letter for letter in _dead_letters(deployed) if letter["kind"] == "conflict"]
    assert conflicts
    bodies = [json.loads(_shown(deployed, letter["message_id"])["body"]) for letter in conflicts]
    assert all(body["revision"] == 2 for body in bodies)
    assert all(deployed.item(body)["amount"] != {"N": str(body["amount"])} for body in bodies)

    code, terminal = deployed.dlq("redrive", "--reason", "conflict", "--dry-run")
    assert code == 1, terminal.error
    n = len(conflicts)
    assert f"dry run: {n} conflict; 0 would be redriven, {n} skipped; nothing was changed" in terminal.lines

    # Without --force the consumer would find the keys done with other content again: they stay, skipped.
    code, terminal = deployed.dlq("redrive", "--reason", "conflict")
    assert code == 1 and f"1 left by the filters, {n} skipped" in terminal.lines, terminal.error
    deployed.drain()
    assert [letter["kind"] for letter in _dead_letters(deployed)].count("conflict") == len(conflicts)

    code, terminal = deployed.dlq("redrive", "--reason", "conflict", "--force", "--yes")
    assert code == 0, terminal.error
    assert f"forgot {len(conflicts)} key(s) (--force)" in terminal.lines
    deployed.drain()

    # Each key now holds its new revision; only the poison message is left.
    for body in bodies:
        item = deployed.item(body)
        assert item is not None
        assert item["amount"] == {"N": str(body["amount"])} and item["revision"] == {"N": "2"}
    assert [letter["kind"] for letter in _dead_letters(deployed)] == ["invalid"]


def _shown(deployed: Deployed, message_id: str) -> dict[str, Any]:
    code, terminal = deployed.dlq("show", message_id, "--json")
    assert code == 0, terminal.error
    return json.loads(terminal.out.getvalue())


def test_purge_removes_the_poison_message(deployed: Deployed) -> None:
    code, terminal = deployed.dlq("purge", "--reason", "invalid", "--yes")

    assert code == 0, terminal.error
    assert "deleted 1; 0 left in the queue by the filters" in terminal.lines
    assert _dead_letters(deployed) == []
