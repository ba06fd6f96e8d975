"""The reference stack (app.py) passes IdempotentPipelineChecks with every option variant its tests
synthesize; a configuration the constructs warn about is the one the pack reports.

All variants are stacks of one app, synthesized once for the module with the pack attached.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from constructs_helpers import cdk_json_context, nag_findings
from test_constructs_reference_app import VARIANTS

import app as reference_app
from idempotent_nag import PACK_NAME, RULES, IdempotentPipelineChecks

# guarded mode, records kept 1 hour, messages 1 day: the constructs warn idempotent-pipeline:short-ttl.
SHORT_TTL = {"mode": "guarded", "dedup_ttl_seconds": "3600", "retention_period_seconds": "86400"}


def stack_id(variant: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", variant).strip("-")


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[str, str]]]:
    """Variant -> [(rule id, resource path inside the stack)]: the pack's ids without its prefix, and what
    else the validation report holds (the constructs' synth warnings, ``Annotation::<id>``)."""
    code = tmp_path_factory.mktemp("code")
    (code / "orders.py").write_text("def handle(message, table):\n    return None\n")
    outdir = tmp_path_factory.mktemp("nag-reference")
    app = cdk.App(context=cdk_json_context(), outdir=str(outdir))
    variants: dict[str, dict[str, Any]] = {**VARIANTS, "short TTL": SHORT_TTL}
    for variant, context in variants.items():
        if context.get("mode") in ("transaction", "guarded"):
            context = {**context, "processor": "orders:handle", "code_directory": str(code)}
        settings = reference_app.settings_from({**cdk_json_context(), **context}.get)
        reference_app.ReferenceStack(app, stack_id(variant), settings=settings)
    cdk.Validations.of(app).add_plugins(IdempotentPipelineChecks(app))
    try:
        app.synth()
    except RuntimeError as error:
        assert "ValidationFailed" in str(error), error
    found: dict[str, list[tuple[str, str]]] = {variant: [] for variant in variants}
    by_stack = {stack_id(variant): variant for variant in variants}
    for rule, _, paths in nag_findings(Path(outdir)):
        for path in paths:
            stack, _, resource = path.partition("/")
            found[by_stack[stack]].append((rule.removeprefix(f"{PACK_NAME}-"), resource))
    return found


def of_the_pack(findings: list[tuple[str, str]]) -> list[tuple[str, str]]:
    ids = {rule.id for rule in RULES}
    return [(rule, path) for rule, path in findings if rule in ids]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_reference_stack_with_each_option_passes_the_pack(variant, findings):
    assert of_the_pack(findings[variant]) == []


def test_a_lifetime_the_constructs_warn_about_is_reported_on_the_function(findings):
    assert of_the_pack(findings["short TTL"]) == [("DedupLifetime", "Pipeline/Consumer/Function/Resource")]
    assert ("Annotation::idempotent-pipeline:short-ttl", "Pipeline/Consumer") in findings["short TTL"]
