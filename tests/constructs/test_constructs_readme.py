"""The README's construct example is real code: it synthesizes, with cdk.json's flags and cdk-nag, to zero
findings."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from constructs_helpers import REPO, add_nag_checks, cdk_json_context, nag_findings

pytestmark = pytest.mark.slow


def _example() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Using the constructs") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the README's constructs section has no python example"
    return match.group(1)


def test_the_readme_example_synthesizes_with_zero_cdk_nag_findings(tmp_path: Path, monkeypatch) -> None:
    code = _example()
    assert "app = cdk.App()" in code and "app.synth()" in code
    # The example's processor, where the example says it is (code_directory="src", processor="orders:handle").
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "orders.py").write_text("def handle(message):\n    return None\n")
    monkeypatch.chdir(tmp_path)
    outdir = tmp_path / "cdk.out"
    code = code.replace("app = cdk.App()", "app = cdk.App(context=CONTEXT, outdir=OUTDIR)")
    code = code.replace(
        "app.synth()",
        "add_nag_checks(app)\napp.synth()",
    )
    namespace = {"CONTEXT": cdk_json_context(), "OUTDIR": str(outdir), "add_nag_checks": add_nag_checks}
    exec(compile(code, "README.md", "exec"), namespace)
    assert nag_findings(outdir) == []
    template = json.loads((outdir / "Orders.template.json").read_text())
    resources = template["Resources"].values()
    (function,) = [r for r in resources if r["Type"] == "AWS::Lambda::Function"]
    variables = function["Properties"]["Environment"]["Variables"]
    assert (variables["PARTITION_KEY_FIELD"], variables["PROCESSOR"]) == ("order.id", "orders:handle")
    topics = [r.get("Properties", {}) for r in resources if r["Type"] == "AWS::SNS::Topic"]
    assert sorted(t.get("FifoTopic", False) for t in topics) == [False, True]  # Oncall, the pipeline's
    assert any(r["Type"] == "AWS::CloudWatch::Dashboard" for r in resources)


def test_the_readme_states_the_supported_range_of_pyproject() -> None:
    readme = " ".join((REPO / "README.md").read_text().split())
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    for name in ("aws-cdk-lib", "constructs"):
        (requirement,) = [d for d in dependencies if d.startswith(f"{name}>=")]
        match = re.fullmatch(rf"{name}>=([\d.]+),<(\d+)", requirement)
        assert match is not None, requirement
        assert f"{name} {match[1]} up to {match[2]}" in readme, name
