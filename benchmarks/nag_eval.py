"""The nag evaluation, tool against tool: the apps of benchmarks/nag_apps.py through idempotent_nag, cdk-nag
AwsSolutions, cfn-lint and serverless-rules (cfn-lint-serverless, a cfn-lint plugin); writes
benchmarks/nag_eval.json and nag_eval.md, which also show idempotent_nag on public sample apps: the
"samples" of nag_eval.json, each app synthesized at the commit it names and checked with
``python -m idempotent_nag cdk.out``, each finding judged against an AWS page (kept from one run to the next).

    .venv/bin/python -m benchmarks.nag_eval        (part of `make bench`)

One app holds every evaluation app as a stack; one synth runs both cdk-nag packs (through Validations), one
cfn-lint process reads every template with serverless-rules appended (``-a cfn_lint_serverless.rules``, as
its README says). A finding counts for the question the evaluation asks - does this configuration lose,
double or stall messages - when its rule answers it: :data:`SAYS` names, for each such rule of the other
tools, the idempotent_nag rule that says the same; their other rules (encryption, IAM, tracing, logging,
memory) are counted apart as "other". Per tool and app:

- found: a planted misconfiguration reported by a rule that says it, on the construct it was planted in (the
  stack's top-level construct: serverless-rules reports an asynchronous function on its Permission);
- missed: a planted misconfiguration not found;
- false: a finding of such a rule that is not a planted misconfiguration (on a correct app, or another
  resource or another claim on a planted one).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from benchmarks.nag_apps import APPS, normalized  # noqa: E402
from benchmarks.report import git_commit  # noqa: E402
from idempotent_nag import PACK_NAME, IdempotentPipelineChecks  # noqa: E402
from idempotent_nag.templates import Templates  # noqa: E402

OUT = Path(__file__).resolve().parent
TOOLS = ("idempotent_nag", "cdk-nag AwsSolutions", "serverless-rules", "cfn-lint")
SERVERLESS_RULE = re.compile(r"[EWI]S\d+")
# cfn-lint's W3005 (a DependsOn CDK generates) is left out, as everywhere in this repository.
CFN_LINT_IGNORED = ("W3005",)
# The other tools' rules about lost, doubled or stalled messages, and the idempotent_nag rule saying the same.
SAYS = {
    "AwsSolutions-SQS3": "QueueDeadLetterQueue",  # a queue that is no DLQ without a DLQ
    "ES6000": "QueueDeadLetterQueue",  # serverless-rules: an SQS queue without a redrive policy
    "ES7000": "SubscriptionDeadLetterQueue",  # an SNS subscription without a redrive policy
    "ES1001": "StreamFailureDestination",  # an event source mapping without an on-failure destination
    "ES1007": "AsyncFailureDestination",  # an asynchronously invoked function without an on-failure one
    "ES4000": "RuleTargetDeadLetterQueue",  # an EventBridge rule's target without a dead-letter queue
    "E3502": "DeadLetterQueueType",  # cfn-lint: a FIFO queue's dead-letter queue of another type
}


@dataclass(frozen=True)
class Finding:
    tool: str
    app: str
    rule: str
    path: str  # the construct path inside the app's stack, without CDK's hashes

    @property
    def says(self) -> str | None:
        """The idempotent_nag rule this finding's rule says the same as; None: not about messages."""
        if self.tool == TOOLS[0]:
            return self.rule
        return SAYS.get(self.rule)


def synthesize(outdir: Path) -> None:
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    # What the CDK CLI sets: each resource's construct path in its metadata (cfn-lint reports logical ids).
    context["aws:cdk:enable-path-metadata"] = True
    app = cdk.App(context=context, outdir=str(outdir))
    for evaluated in APPS:
        evaluated.build(cdk.Stack(app, evaluated.name))
    cdk.Validations.of(app).add_plugins(IdempotentPipelineChecks(app), AwsSolutionsChecks(app))
    try:
        app.synth()
    except RuntimeError as error:  # the packs' errors fail the synth after the templates are written
        if "ValidationFailed" not in str(error):
            raise


def nag_findings(outdir: Path) -> list[Finding]:
    report = json.loads((outdir / "validation-report.json").read_text())
    found = []
    for plugin in report["pluginReports"]:
        for violation in plugin["violations"]:
            rule = violation["ruleName"]
            tool = TOOLS[0] if rule.startswith(f"{PACK_NAME}-") else TOOLS[1]
            if tool == TOOLS[1] and not rule.startswith("AwsSolutions-"):
                continue  # cdk.json's flag also puts CDK's own annotations in the report
            for construct in violation["violatingConstructs"]:
                stack, _, path = construct["constructPath"].partition("/")
                found.append(
                    Finding(tool, stack, rule.removeprefix(f"{PACK_NAME}-"), normalized(stack, path))
                )
    return found


def lint_findings(outdir: Path) -> list[Finding]:
    """cfn-lint with serverless-rules appended, on every template; a finding of a serverless rule (ES, WS,
    IS ids) is serverless-rules', any other cfn-lint's."""
    templates = {evaluated.name: outdir / f"{evaluated.name}.template.json" for evaluated in APPS}
    command = [
        str(Path(sys.executable).with_name("cfn-lint")),
        "--format",
        "json",
        "--append-rules",
        "cfn_lint_serverless.rules",
        "--ignore-checks",
        *CFN_LINT_IGNORED,
        "--",
        *map(str, templates.values()),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode not in (0, 2, 4, 6, 8, 10, 12, 14):  # cfn-lint's bit mask of error, warning, info
        raise RuntimeError(f"cfn-lint failed ({result.returncode}): {result.stderr[-2000:]}")
    read = Templates.read((name, name, str(file)) for name, file in templates.items())
    by_file = {str(file): name for name, file in templates.items()}
    found = []
    for match in json.loads(result.stdout or "[]"):
        app = by_file[match["Filename"]]
        location = match["Location"]["Path"] or []
        logical = location[1] if len(location) > 1 and location[0] == "Resources" else ""
        rule = match["Rule"]["Id"]
        tool = TOOLS[2] if SERVERLESS_RULE.fullmatch(rule) else TOOLS[3]
        resource = read.resources.get((app, logical))
        path = resource.path.partition("/")[2] if resource else logical  # construct path inside the stack
        found.append(Finding(tool, app, rule, normalized(app, path)))
    return found


def score(findings: Iterable[Finding]) -> dict[str, Any]:
    """Per tool: found, missed and false (with what), other findings; per planted misconfiguration, the
    tools that found it."""
    findings = list(findings)
    planted = [(app.name, rule, path) for app in APPS for rule, _, path in app.planted]
    # One misconfiguration per app (FilteredSharedQueue's is reported on both mappings): found when a tool
    # reports it on one of its constructs.
    found_by: dict[str, list[str]] = {f"{app}: {rule}": [] for app, rule, _ in planted}
    tools: dict[str, dict[str, Any]] = {}
    for tool in TOOLS:
        mine = [f for f in findings if f.tool == tool]
        relevant = [f for f in mine if f.says is not None]
        matched: set[Finding] = set()
        for app, rule, path in planted:
            hits = [f for f in relevant if f.app == app and f.says == rule and _top(f.path) == _top(path)]
            matched.update(hits)
            if hits and tool not in found_by[f"{app}: {rule}"]:
                found_by[f"{app}: {rule}"].append(tool)
        false = sorted({f"{f.app}: {f.rule} on {f.path}" for f in relevant if f not in matched})
        found = sum(tool in tools_ for tools_ in found_by.values())
        tools[tool] = {
            "found": found,
            "missed": len(found_by) - found,
            "false": len(false),
            "false_findings": false,
            "other_findings": len(mine) - len(relevant),
            "rules_about_messages": sorted({f.rule for f in relevant}),
        }
    return {"planted": len(found_by), "tools": tools, "found_by": found_by}


def _top(path: str) -> str:
    return path.split("/")[0]


def render(result: dict[str, Any]) -> str:
    tools = result["tools"]
    lines = [
        "# Nag evaluation: what each tool reports on plain-CDK SNS/SQS/Lambda/DynamoDB apps",
        "",
        f"Produced by `{result['command']}` (part of `make bench`) on {result['date']}, commit "
        f"{result['commit']}; {', '.join(f'{k} {v}' for k, v in result['versions'].items())}.",
        "",
        f"{len(APPS)} apps ([benchmarks/nag_apps.py](nag_apps.py)): {result['correct']} correct and "
        f"hardened, {result['planted']} misconfigurations planted in the others. Found: a planted "
        "misconfiguration reported by a rule that says it, on the construct it is planted in; false: a "
        "finding of a rule about lost, doubled or stalled messages that is not a planted misconfiguration; "
        "other: findings "
        "about something else (encryption, IAM, tracing, logging, memory), not counted either way.",
        "",
        "| tool | found | missed | false | other findings | its rules about messages that fired |",
        "|---|---|---|---|---|---|",
    ]
    for tool in TOOLS:
        t = tools[tool]
        rules = ", ".join(t["rules_about_messages"]) or "none"
        if tool == TOOLS[0]:
            rules = f"{len(t['rules_about_messages'])} rules"
        lines.append(
            f"| {tool} | {t['found']}/{result['planted']} | {t['missed']} | {t['false']} | "
            f"{t['other_findings']} | {rules} |"
        )
    others = set().union(*({k for k, v in result["found_by"].items() if tool in v} for tool in TOOLS[1:]))
    ours = {k for k, v in result["found_by"].items() if TOOLS[0] in v}
    lines += [
        "",
        f"Found by cdk-nag AwsSolutions, serverless-rules or cfn-lint: {len(others)}; by idempotent_nag: "
        f"{len(ours)}, including all of those: {'yes' if others <= ours else 'no'}"
        + (f" (not: {', '.join(sorted(others - ours))})" if others - ours else "")
        + ".",
        "",
        "| app: planted misconfiguration | " + " | ".join(TOOLS) + " |",
        "|---|" + "---|" * len(TOOLS),
    ]
    for planted, found_by in result["found_by"].items():
        lines.append(f"| {planted} | " + " | ".join("found" if t in found_by else "-" for t in TOOLS) + " |")
    lines += ["", "False findings (rules about messages, where nothing was planted):", ""]
    for tool in TOOLS:
        lines.append(f"- {tool}: " + ("; ".join(tools[tool]["false_findings"]) or "none"))
    return "\n".join(lines + samples(result.get("samples", []))) + "\n"


def samples(apps: list[dict[str, Any]]) -> list[str]:
    """The table of idempotent_nag's findings on the public sample apps, each with its verdict."""
    found = [finding for app in apps for finding in app["findings"]]
    true = sum(finding["verdict"] == "true" for finding in found)
    repositories = " and ".join(sorted({app["repository"] for app in apps}))
    lines = [
        "",
        "## idempotent_nag on public sample apps",
        "",
        f"{len(apps)} apps nobody here wrote, from {repositories}, each synthesized at the commit named "
        "(`npx cdk synth` in its folder, aws-cdk-lib of the version above) and checked with "
        "`python -m idempotent_nag cdk.out`: "
        f"{len(found)} findings, {true} true, {len(found) - true} false, each judged against the AWS page "
        "named.",
        "",
        "| app (repository, commit, language) | finding (level) | on | verdict: why (AWS page) |",
        "|---|---|---|---|",
    ]
    for app in apps:
        name = f"{app['path']} ({app['repository'].split('/')[1]}, {app['commit'][:8]}, {app['language']})"
        lines += [f"| {name} | none | | |"] if not app["findings"] else []
        for f in app["findings"]:
            page = f"[{f['aws'].rsplit('/', 1)[1].removesuffix('.html')}]({f['aws']})"
            finding = f"{f['rule']} ({f['level']}) | {f['resource']}"
            lines.append(f"| {name} | {finding} | {f['verdict']}: {f['why']} ({page}) |")
    return lines


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="nag-eval-") as directory:
        outdir = Path(directory)
        synthesize(outdir)
        findings = nag_findings(outdir) + lint_findings(outdir)
    result = score(findings)
    kept = json.loads((OUT / "nag_eval.json").read_text()) if (OUT / "nag_eval.json").exists() else {}
    result.update(
        samples=kept.get("samples", []),
        command="python -m benchmarks.nag_eval",
        date=dt.date.today().isoformat(),
        commit=git_commit(),
        correct=sum(not app.planted for app in APPS),
        versions={
            name: metadata.version(name)
            for name in ("aws-cdk-lib", "cdk-nag", "cfn-lint", "cfn-lint-serverless")
        },
    )
    (OUT / "nag_eval.json").write_text(json.dumps(result, indent=2) + "\n")
    (OUT / "nag_eval.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")
    raise SystemExit(main())
