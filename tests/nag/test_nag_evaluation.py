"""The nag evaluation (benchmarks/nag_apps.py): on plain aws-cdk-lib apps, IdempotentPipelineChecks reports
each planted misconfiguration with its rule alone, at its level, on the resource to fix, and nothing on the
two correct apps. benchmarks/nag_eval.py runs the same apps through cdk-nag, cfn-lint and serverless-rules.

All apps are stacks of one app, synthesized once for the session with the pack attached.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest
from constructs_helpers import cdk_json_context, nag_findings

from benchmarks.nag_apps import APPS, normalized
from idempotent_nag import PACK_NAME, RULES, IdempotentPipelineChecks

PLANTED = [app for app in APPS if app.planted]
CORRECT = [app for app in APPS if not app.planted]


@pytest.fixture(scope="session")
def reported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[tuple[str, str, str]]]:
    """App name -> {(rule id without the pack's prefix, level, construct path inside the stack)}."""
    outdir = tmp_path_factory.mktemp("nag-evaluation")
    app = cdk.App(context=cdk_json_context(), outdir=str(outdir))
    for evaluated in APPS:
        evaluated.build(cdk.Stack(app, evaluated.name))
    cdk.Validations.of(app).add_plugins(IdempotentPipelineChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    found: dict[str, set[tuple[str, str, str]]] = {evaluated.name: set() for evaluated in APPS}
    for rule, level, paths in nag_findings(Path(outdir)):
        if not rule.startswith(f"{PACK_NAME}-"):  # cdk.json's flag also reports CDK's own annotations
            continue
        for path in paths:
            stack, _, resource = path.partition("/")
            found[stack].add((rule.removeprefix(f"{PACK_NAME}-"), level, normalized(stack, resource)))
    return found


@pytest.mark.parametrize("evaluated", PLANTED, ids=lambda a: a.name)
def test_each_planted_misconfiguration_is_reported_by_its_rule_alone_at_its_level(evaluated, reported):
    assert reported[evaluated.name] == set(evaluated.planted), evaluated.what


@pytest.mark.parametrize("evaluated", CORRECT, ids=lambda a: a.name)
def test_a_correct_hardened_app_gets_no_finding(evaluated, reported):
    assert reported[evaluated.name] == set()


def test_every_rule_has_an_app_with_its_misconfiguration_and_two_apps_are_correct():
    assert {rule for app in PLANTED for rule, _, _ in app.planted} == {rule.id for rule in RULES}
    assert len(CORRECT) >= 2


def test_a_batch_of_one_message_without_partial_batch_responses_is_no_finding(reported):
    """One record per invocation: failing the batch fails only that record (the pack reported it at ERROR
    and failed the synth)."""
    single = next(app for app in CORRECT if "batch size of 1" in app.what)
    assert reported[single.name] == set()
