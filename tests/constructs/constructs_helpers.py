"""Helpers of the construct tests (imported by name: tests/constructs is on sys.path under pytest)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
NODE_BIN = REPO / "node_modules" / ".bin"
VENV_BIN = REPO / ".venv" / "bin"


def _node_major() -> str:
    node = shutil.which("node")
    if node is None:
        return ""
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout
    return out.strip().lstrip("v").split(".")[0]


def _silence_node_banner() -> None:
    """jsii prints an end-of-life banner unless the variable lists the running Node major version."""
    major = _node_major()
    for name in (
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION",
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION",
    ):
        listed = [v for v in os.environ.get(name, "").split(",") if v]
        if major and major not in listed:
            os.environ[name] = ",".join([*listed, major])
    os.environ.setdefault("AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE", "1")
    os.environ.setdefault("CDK_DISABLE_CLI_TELEMETRY", "true")


_silence_node_banner()

import aws_cdk as cdk  # noqa: E402  (after the environment above: jsii reads it at start)
from aws_cdk import assertions  # noqa: E402


def cdk_json_context() -> dict[str, Any]:
    """The feature flags and context of cdk.json, so in-process apps synthesize like `npx cdk synth`."""
    return json.loads((REPO / "cdk.json").read_text())["context"]


def new_stack(name: str = "TestStack") -> cdk.Stack:
    """A stack in a fresh app with the repository's feature flags (cheap once jsii runs)."""
    app = cdk.App(context=cdk_json_context())
    return cdk.Stack(app, name)


def template_of(stack: cdk.Stack) -> assertions.Template:
    return assertions.Template.from_stack(stack)


def resources(template: assertions.Template, type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template.to_json()["Resources"].items() if v["Type"] == type_}


def only(template: assertions.Template, type_: str) -> dict[str, Any]:
    found = resources(template, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.values()))


def policy_statements(template: assertions.Template) -> list[dict[str, Any]]:
    statements = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def actions_of(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def cdk_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(VENV_BIN), str(NODE_BIN), env.get("PATH", "")])
    return env


def function_asset_dir(stack: Any) -> Path:
    """The directory of the (single) Lambda code asset in the stack's synthesized cloud assembly."""
    import aws_cdk as cdk

    template = stack.node.root.synth().get_stack_by_name(stack.stack_name).template
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == 1, functions
    key = functions[0]["Properties"]["Code"]["S3Key"]
    asset_hash = key.removesuffix(".zip")
    root = stack.node.root
    assert isinstance(root, cdk.App)
    directory = Path(root.outdir) / f"asset.{asset_hash}"
    assert directory.is_dir(), f"no asset directory {directory}"
    return directory


def files_under(directory: Path) -> set[str]:
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()}
