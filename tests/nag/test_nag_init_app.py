"""The app `idempotent-pipeline init` writes has no finding of the pack: its own app.py, run in this process
with its cdk.json's context and the pack attached to the app it creates."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from constructs_helpers import nag_findings

from idempotent_cli.main import main
from idempotent_nag import PACK_NAME, IdempotentPipelineChecks


@pytest.fixture(scope="module")
def outdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("apps") / "my-orders"
    assert main(["init", str(directory)]) == 0
    outdir = tmp_path_factory.mktemp("cdk.out")
    context = json.loads((directory / "cdk.json").read_text())["context"]
    created = cdk.App

    def checked_app(**props: Any) -> cdk.App:
        """The App app.py creates, as `npx cdk synth` would give it its context, with the pack attached
        (jsii's process was started before: the CLI's environment variables would not reach it)."""
        app = created(**{**props, "context": context, "outdir": str(outdir)})
        cdk.Validations.of(app).add_plugins(IdempotentPipelineChecks(app))
        return app

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cdk, "App", checked_app)
        runpy.run_path(str(directory / "app.py"), run_name="__main__")
    return outdir


def test_the_init_app_has_no_finding_of_the_pack(outdir):
    assert (outdir / "MyOrders.template.json").exists()
    assert [rule for rule, _, _ in nag_findings(outdir) if rule.startswith(PACK_NAME)] == []
