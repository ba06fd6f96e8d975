"""``make integ`` without an AWS account: it refuses to start without credentials, and a run deploys, reads
the assertion results, and destroys whatever happened (the CDK CLI replaced by a stand-in that records its
commands)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "integ"))

import harness  # noqa: E402  (integ/ on the path first)

APP = harness.APPS[0]


def no_aws_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any AWS credentials, profile or instance metadata to find."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AWS_") and k not in ("MAKEFLAGS", "MAKELEVEL")
    }
    empty = tmp_path / "empty"
    empty.write_text("")
    return env | {
        "AWS_CONFIG_FILE": str(empty),
        "AWS_SHARED_CREDENTIALS_FILE": str(empty),
        "AWS_EC2_METADATA_DISABLED": "true",
        **extra,
    }


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(
    ("profile", "says"),
    [
        ([], "found no AWS credentials"),
        (["AWS_PROFILE=nowhere"], "The config profile (nowhere) could not be found"),
    ],
)
def test_make_integ_refuses_to_start_without_credentials_and_says_what_to_do(tmp_path, profile, says):
    result = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-o",
            ".venv/.installed",
            "-o",
            "node_modules/.installed",
            "integ",
            *profile,
        ],
        cwd=REPO,
        env=no_aws_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert says in result.stderr
    assert "make integ AWS_PROFILE=my-profile" in result.stderr


def test_an_unknown_test_name_is_refused_before_anything_else():
    with pytest.raises(harness.Refused, match="unknown integration tests"):
        harness.deploy(["integ_nowhere"], keep=False)


# Records every command in $CDK_CALLS; `deploy` writes $OUTPUTS to its --outputs-file and exits $DEPLOY_EXIT.
FAKE_NPX = textwrap.dedent(
    """\
    #!/usr/bin/env bash
    echo "$*" >> "$CDK_CALLS"
    previous=""
    for argument in "$@"; do
        if [ "$previous" = "--outputs-file" ]; then printf '%s' "$OUTPUTS" > "$argument"; fi
        previous="$argument"
    done
    case " $* " in
        *" deploy "*) exit "${DEPLOY_EXIT:-0}" ;;
    esac
    """
)
SUCCESS = json.dumps({"status": "success"})
FAIL = json.dumps({"status": "fail", "message": "Expected 350 but received 600 at /Item/balance/N"})


@pytest.fixture
def cdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in CLI on PATH; returns the file its commands are recorded in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npx = bin_dir / "npx"
    npx.write_text(FAKE_NPX)
    npx.chmod(0o755)
    calls = tmp_path / "calls"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CDK_CALLS", str(calls))
    monkeypatch.setattr(harness, "RUNS", tmp_path / "runs")
    return calls


def commands(calls: Path) -> list[str]:
    """The CDK commands run, in order (``deploy``, ``destroy``)."""
    return [
        word
        for line in calls.read_text().splitlines()
        for word in line.split()
        if word in ("deploy", "destroy")
    ]


@pytest.mark.parametrize(
    ("outputs", "deploy_exit", "passed"),
    [
        ({"Assert": {"AssertionResultsA": SUCCESS, "AssertionResultsB": SUCCESS, "Other": "x"}}, "0", True),
        ({"Assert": {"AssertionResultsA": SUCCESS, "AssertionResultsB": FAIL}}, "0", False),
        ({}, "1", False),  # a step that never held failed the deployment
    ],
    ids=["assertions-held", "an-assertion-failed", "deployment-failed"],
)
def test_a_run_deploys_reads_the_assertions_and_always_destroys(
    cdk, monkeypatch, outputs, deploy_exit, passed
):
    monkeypatch.setenv("OUTPUTS", json.dumps(outputs))
    monkeypatch.setenv("DEPLOY_EXIT", deploy_exit)
    said: list[str] = []

    assert harness.run(APP, keep=False, say=lambda app, *lines: said.extend(lines)) is passed

    assert commands(cdk) == ["deploy", "destroy"]
    assert "destroyed" in said
    assert ("every assertion held" in said) is passed
    if outputs.get("Assert", {}).get("AssertionResultsB") == FAIL:
        assert any("Expected 350 but received 600" in line for line in said)


def test_a_kept_run_is_not_destroyed(cdk, monkeypatch):
    monkeypatch.setenv("OUTPUTS", json.dumps({"Assert": {"AssertionResultsA": SUCCESS}}))
    said: list[str] = []
    assert harness.run(APP, keep=True, say=lambda app, *lines: said.extend(lines))
    assert commands(cdk) == ["deploy"]
    assert any("kept" in line for line in said)
