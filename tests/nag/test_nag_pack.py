"""The pack as a user meets it: a warning is reported and the synth goes on, an error fails the synth; on an
app already synthesized, ``python -m idempotent_nag cdk.out`` prints the findings and exits 1 for an error."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from constructs_helpers import cdk_json_context, nag_findings

from benchmarks.nag_apps import orders_pipeline
from idempotent_nag import PACK_NAME, IdempotentPipelineChecks
from idempotent_nag.__main__ import main


def app_with(outdir: Path, *, pack: bool, **planted: Any) -> cdk.App:
    """An app with the plain orders pipeline (``planted`` changes it), the pack attached when ``pack``."""
    # what `npx cdk synth` sets: each resource's construct path in its metadata
    context = {**cdk_json_context(), "aws:cdk:enable-path-metadata": True}
    app = cdk.App(context=context, outdir=str(outdir))
    orders_pipeline(cdk.Stack(app, "Orders"), **planted)
    if pack:
        cdk.Validations.of(app).add_plugins(IdempotentPipelineChecks(app))
    return app


def of_the_pack(outdir: Path) -> list[tuple[str, str, list[str]]]:
    return [finding for finding in nag_findings(outdir) if finding[0].startswith(PACK_NAME)]


def printed_to_stderr(capsys, awaited: str, seconds: float = 10.0) -> str:
    """What reached stderr: the jsii kernel's report comes through a thread of its own, so it may follow
    ``synth()`` by a moment; read until ``awaited`` is there or ``seconds`` have passed."""
    printed, deadline = "", time.monotonic() + seconds
    while awaited not in printed and time.monotonic() < deadline:
        time.sleep(0.05)
        printed += capsys.readouterr().err
    return printed


def test_a_warning_is_reported_and_the_synth_goes_on(tmp_path, capsys):
    app_with(tmp_path, pack=True, max_receive_count=2).synth()  # maxReceiveCount 2: a warning
    assert of_the_pack(tmp_path) == [(f"{PACK_NAME}-MaxReceiveCount", "warning", ["Orders/Queue/Resource"])]
    assert (tmp_path / "Orders.template.json").exists()
    assert f"{PACK_NAME}-MaxReceiveCount" in printed_to_stderr(capsys, f"{PACK_NAME}-MaxReceiveCount")


def test_an_error_fails_the_synth(tmp_path):
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app_with(tmp_path, pack=True, max_receive_count=None).synth()  # no dead-letter queue: an error
    assert of_the_pack(tmp_path) == [
        (f"{PACK_NAME}-QueueDeadLetterQueue", "error", ["Orders/Queue/Resource"])
    ]


def test_the_command_on_a_synthesized_app_prints_each_finding_and_exits_1_for_an_error(tmp_path, capsys):
    app_with(tmp_path / "errors", pack=False, max_receive_count=None).synth()
    app_with(tmp_path / "warnings", pack=False, max_receive_count=2).synth()
    assert main([str(tmp_path / "errors")]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"error {PACK_NAME}-QueueDeadLetterQueue Orders/Queue/Resource: A Lambda")
    assert printed[-1] == "1 findings, 1 of them errors"
    assert main([str(tmp_path / "warnings")]) == 0
    assert (
        capsys.readouterr()
        .out.splitlines()[0]
        .startswith(f"warning {PACK_NAME}-MaxReceiveCount Orders/Queue")
    )


def test_the_command_on_a_directory_that_is_no_cloud_assembly_says_so_and_exits_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        main([str(tmp_path)])
    assert exit.value.code == 2
    assert f"{tmp_path} is not a cloud assembly (no manifest.json in it): synthesize the app first" in (
        capsys.readouterr().err
    )
