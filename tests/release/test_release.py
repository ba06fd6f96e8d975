"""The release as users get it (``make release-check``): the sdist and wheel ``python -m build`` wrote to
dist/, checked by twine, their contents and metadata, and the package installed by name (``pip install
idempotent-pipeline --find-links dist/``) into a fresh venv next to an app pinned to the oldest aws-cdk-lib
and constructs the wheel accepts, where a small app synthesizes.

make release-check builds dist/ and names it in RELEASE_CHECK_DIST; without it (make test) this is skipped.
The install downloads the floor's aws-cdk-lib from the package index (pip's cache makes it quick after
make test's floor environment).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]

if not os.environ.get("RELEASE_CHECK_DIST"):
    pytest.skip("make release-check builds dist/ and runs these", allow_module_level=True)

DIST = Path(os.environ["RELEASE_CHECK_DIST"]).resolve()
# Source directory of each package the wheel ships (the runtime lives in lambda_src/).
PACKAGES = {
    "idempotent_pipeline": REPO / "idempotent_pipeline",
    "idempotent_runtime": REPO / "lambda_src" / "idempotent_runtime",
    "idempotent_cli": REPO / "idempotent_cli",
    "idempotent_local": REPO / "idempotent_local",
    "idempotent_nag": REPO / "idempotent_nag",
}

APP = textwrap.dedent(
    """
    import json
    import sys

    import aws_cdk as cdk

    import idempotent_pipeline
    from idempotent_pipeline import ConsumerOptions, IdempotentPipeline, MessagingOptions

    app = cdk.App(outdir=sys.argv[1])
    stack = cdk.Stack(app, "Orders")
    IdempotentPipeline(
        stack,
        "Orders",
        messaging_options=MessagingOptions(high_throughput=True),
        consumer_options=ConsumerOptions(partition_key_field="order_id", sort_key_field="line_id"),
    )
    app.synth()
    print(json.dumps({"module": idempotent_pipeline.__file__}))
    """
)


def _one(pattern: str) -> Path:
    found = sorted(DIST.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {DIST}, found {[p.name for p in found]}"
    return found[0]


@pytest.fixture(scope="module")
def wheel() -> Path:
    return _one("idempotent_pipeline-*-py3-none-any.whl")


@pytest.fixture(scope="module")
def sdist() -> Path:
    return _one("idempotent_pipeline-*.tar.gz")


@pytest.fixture(scope="module")
def wheel_names(wheel: Path) -> list[str]:
    return zipfile.ZipFile(wheel).namelist()


@pytest.fixture(scope="module")
def metadata(wheel: Path, wheel_names: list[str]) -> Message:
    (name,) = [n for n in wheel_names if n.endswith(".dist-info/METADATA")]
    return Parser().parsestr(zipfile.ZipFile(wheel).read(name).decode())


@pytest.fixture(scope="module")
def floor(metadata: Message) -> dict[str, str]:
    """The oldest aws-cdk-lib and constructs the wheel accepts: the `>=` bounds of its requirements."""
    pins = {}
    for line in metadata.get_all("Requires-Dist"):
        requirement = Requirement(line)
        if requirement.name in ("aws-cdk-lib", "constructs") and not requirement.marker:
            (lowest,) = [s.version for s in requirement.specifier if s.operator == ">="]
            pins[requirement.name] = lowest
    assert set(pins) == {"aws-cdk-lib", "constructs"}, pins
    return pins


def test_twine_accepts_the_sdist_and_the_wheel(wheel: Path, sdist: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_the_version_is_the_runtimes_everywhere(wheel: Path, sdist: Path, metadata: Message) -> None:
    from idempotent_runtime import __version__
    from idempotent_runtime.clients import USER_AGENT

    assert metadata["Version"] == __version__
    assert wheel.name == f"idempotent_pipeline-{__version__}-py3-none-any.whl"
    assert sdist.name == f"idempotent_pipeline-{__version__}.tar.gz"
    assert USER_AGENT.split("/") == ["idempotent-runtime", __version__]


def test_the_metadata_holds_what_package_indexes_and_construct_hub_read(metadata: Message) -> None:
    from trove_classifiers import classifiers as known

    keywords = metadata["Keywords"].split(",")
    assert {"aws-cdk", "cdk", "awscdk", "sqs", "sns", "dynamodb", "lambda", "idempotency"} <= set(keywords)
    classifiers = metadata.get_all("Classifier")
    assert not [c for c in classifiers if c not in known], "classifiers PyPI would refuse"
    assert {
        "Framework :: AWS CDK :: 2",
        "Programming Language :: Python :: 3.11",
        "Typing :: Typed",
    } <= set(classifiers)
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert (metadata["License-Expression"], metadata["Requires-Python"]) == ("Apache-2.0", ">=3.11")
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload().startswith("# idempotent-pipeline")


def test_the_wheel_requires_aws_cdk_lib_2_from_the_floor(metadata: Message, floor: dict[str, str]) -> None:
    requirements = {Requirement(r).name: Requirement(r) for r in metadata.get_all("Requires-Dist")}
    assert str(requirements["aws-cdk-lib"].specifier) == f"<3,>={floor['aws-cdk-lib']}"
    assert str(requirements["constructs"].specifier) == f"<11,>={floor['constructs']}"


def test_the_wheel_holds_every_package_typed_and_the_app_templates(wheel_names: list[str]) -> None:
    names = set(wheel_names)
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == set(PACKAGES)
    for package, source in PACKAGES.items():
        assert f"{package}/py.typed" in names, package
        modules = {
            f"{package}/{p.relative_to(source).as_posix()}"
            for p in source.rglob("*.py")
            if "__pycache__" not in p.parts
        }
        assert modules <= names, sorted(modules - names)
    templates = REPO / "idempotent_cli" / "templates"
    app_files = {
        f"idempotent_cli/templates/{p.relative_to(templates).as_posix()}"
        for p in templates.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert app_files and app_files <= names, sorted(app_files - names)


def test_the_wheel_and_the_sdist_hold_no_tests_caches_or_build_leftovers(
    wheel_names: list[str], sdist: Path
) -> None:
    with tarfile.open(sdist) as archive:
        sdist_names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    for names in (wheel_names, sdist_names):
        unwanted = [
            n
            for n in names
            if n.startswith(("tests/", "benchmarks/", "docs/", "build/", "cdk.out/", ".venv"))
            or "__pycache__" in n
            or n.endswith((".pyc", ".pyo"))
            or ".local-cloud" in n
        ]
        assert unwanted == []
    assert {"pyproject.toml", "README.md", "LICENSE", "lambda_src/idempotent_runtime/handler.py"} <= set(
        sdist_names
    )


def _run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900, **kwargs)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def app_on_the_floor(tmp_path_factory: pytest.TempPathFactory, floor: dict[str, str]) -> dict[str, Any]:
    """A team's app pinned to the floor (requirements.txt), then this package installed next to it by name."""
    work = tmp_path_factory.mktemp("floor-app")
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    app = work / "app"
    app.mkdir()
    (app / "requirements.txt").write_text("".join(f"{name}=={version}\n" for name, version in floor.items()))
    (app / "app.py").write_text(APP)
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "-r", "requirements.txt"], cwd=app, env=env)
    _run([*pip, "idempotent-pipeline", "--find-links", str(DIST)], cwd=app, env=env)
    versions = _run(
        [
            python,
            "-c",
            "import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in "
            "('aws-cdk-lib', 'constructs', 'idempotent-pipeline')}))",
        ],
        env=env,
    )
    outdir = app / "cdk.out"
    synth = _run([python, "app.py", str(outdir)], cwd=app, env=env)
    return {
        "venv": venv,
        "versions": json.loads(versions.stdout),
        "module": json.loads(synth.stdout.strip().splitlines()[-1])["module"],
        "outdir": outdir,
        "template": json.loads((outdir / "Orders.template.json").read_text()),
    }


def test_installing_by_name_next_to_an_app_pinned_to_the_floor_keeps_the_apps_pins(
    app_on_the_floor: dict[str, Any], floor: dict[str, str], metadata: Message
) -> None:
    assert app_on_the_floor["versions"] == {**floor, "idempotent-pipeline": metadata["Version"]}
    assert Path(app_on_the_floor["module"]).resolve().is_relative_to(app_on_the_floor["venv"].resolve())


def test_an_app_on_the_floor_synthesizes_the_pipeline_with_its_runtime(
    app_on_the_floor: dict[str, Any],
) -> None:
    resources = list(app_on_the_floor["template"]["Resources"].values())
    types = {r["Type"] for r in resources}
    assert {"AWS::SNS::Topic", "AWS::SNS::TopicPolicy", "AWS::SQS::Queue", "AWS::DynamoDB::Table"} <= types
    (function,) = [r["Properties"] for r in resources if r["Type"] == "AWS::Lambda::Function"]
    assert (function["Handler"], function["Runtime"]) == ("idempotent_runtime.handler.handler", "python3.14")
    asset = app_on_the_floor["outdir"] / f"asset.{function['Code']['S3Key'].removesuffix('.zip')}"
    assert (asset / "idempotent_runtime" / "handler.py").is_file()
    (topic,) = [r["Properties"] for r in resources if r["Type"] == "AWS::SNS::Topic"]
    assert topic["FifoThroughputScope"] == "MessageGroup"
    (table,) = [r["Properties"] for r in resources if r["Type"] == "AWS::DynamoDB::Table"]
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
