"""docs/constructs.md attaches the pack to an existing app in three lines: those lines, run on a plain app,
report its misconfiguration."""

from __future__ import annotations

import re

import aws_cdk as cdk
import pytest
from constructs_helpers import REPO, cdk_json_context, nag_findings

from benchmarks.nag_apps import orders_pipeline
from idempotent_nag import PACK_NAME


def attach_lines() -> list[str]:
    docs = (REPO / "docs" / "constructs.md").read_text()
    section = docs[docs.index("## The same rules for any app (cdk-nag)") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1).strip().splitlines()


def test_the_docs_three_lines_attach_the_pack_to_an_existing_app(tmp_path):
    lines = attach_lines()
    assert len(lines) == 3
    app = cdk.App(context=cdk_json_context(), outdir=str(tmp_path))
    orders_pipeline(cdk.Stack(app, "Existing"), max_receive_count=None)  # a queue without a DLQ
    exec("\n".join(lines), {"app": app})
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert [(rule, paths) for rule, _, paths in nag_findings(tmp_path) if rule.startswith(PACK_NAME)] == [
        (f"{PACK_NAME}-QueueDeadLetterQueue", ["Existing/Queue/Resource"])
    ]
