"""The wheel ships the runtime: an app outside the checkout, using the installed wheel, bundles it.

The wheel goes into a fresh venv with --no-deps; aws-cdk-lib, constructs and jsii come from the project's
venv through a .pth file (fast, no download), and the test checks that idempotent_pipeline and
idempotent_runtime are imported from the fresh venv, not from this checkout.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest
from constructs_helpers import REPO, cdk_env

from idempotent_pipeline._asset import NOT_RUN_BY_THE_FUNCTION, without_docs


def _can_build() -> bool:
    """Whether ``python -m build`` runs: the module, not a ``build/`` directory where pytest runs (``make
    wheel`` leaves one in the checkout, which ``find_spec("build")`` takes for the package)."""
    try:
        return importlib.util.find_spec("build.__main__") is not None
    except ModuleNotFoundError:
        return False


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not _can_build(),
        reason="python -m build is not installed (make release-check tests the wheel next to the floor)",
    ),
]

SOURCES = ("pyproject.toml", "README.md", "idempotent_pipeline", "lambda_src")
# The outside app runs document mode: the asset holds no other mode's module.
OTHER_MODES = {"modes/transaction", "modes/guarded", "modes/versioned"}
RUNTIME_FILES = sorted(  # what the function runs: the asset holds these
    p.relative_to(REPO / "lambda_src").as_posix()
    for p in (REPO / "lambda_src" / "idempotent_runtime").rglob("*.py")
    if "__pycache__" not in p.parts and p.stem not in NOT_RUN_BY_THE_FUNCTION
    if f"{p.parent.name}/{p.stem}" not in OTHER_MODES
)

OUTSIDE_APP = textwrap.dedent(
    """
    import json
    import sys

    import aws_cdk as cdk
    from aws_cdk import Duration

    import idempotent_pipeline
    import idempotent_runtime
    from idempotent_pipeline import ConsumerOptions, IdempotentPipeline, TableOptions

    app = cdk.App(outdir=sys.argv[1])
    stack = cdk.Stack(app, "Outside")
    pipeline = IdempotentPipeline(
        stack,
        "Orders",
        table_options=TableOptions(
            partition_key_name="tenant", sort_key_name="event_id", time_to_live_attribute="gone_at"
        ),
        consumer_options=ConsumerOptions(
            partition_key_field="tenant", sort_key_field="id", dedup_ttl=Duration.days(2)
        ),
    )
    app.synth()
    print(json.dumps({
        "idempotent_pipeline": idempotent_pipeline.__file__,
        "idempotent_runtime": idempotent_runtime.__file__,
    }))
    """
)


def _build_wheel(source: Path, dist: Path) -> Path:
    """Build the wheel from a copy of the sources (the checkout gets no build/ or egg-info)."""
    offline = importlib.util.find_spec("wheel") is not None
    command = [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(source)]
    if offline:
        # setuptools 65 builds wheels with the `wheel` package; with it present, no download is needed.
        command[4:4] = ["--no-isolation", "--skip-dependency-check"]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, f"wheel build failed:\n{result.stdout}\n{result.stderr}"
    wheels = list(dist.glob("idempotent_pipeline-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="session")
def outside_app(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(origin, source / name)
    wheel = _build_wheel(source, work / "dist")

    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    fresh_site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Heavy dependencies from the project's venv, appended after the fresh site-packages.
    (fresh_site / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    app_dir = work / "outside_app"
    app_dir.mkdir()
    (app_dir / "app.py").write_text(OUTSIDE_APP)
    env = cdk_env()
    env.pop("PYTHONPATH", None)
    outdir = app_dir / "cdk.out"
    result = subprocess.run(
        [str(python), "app.py", str(outdir)],
        cwd=app_dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, f"outside app failed:\n{result.stdout}\n{result.stderr}"
    modules = json.loads(result.stdout.strip().splitlines()[-1])
    template = json.loads((outdir / "Outside.template.json").read_text())
    return {"wheel": wheel, "venv": venv, "modules": modules, "template": template, "outdir": outdir}


def _function(template: dict[str, Any]) -> dict[str, Any]:
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == 1
    return functions[0]["Properties"]


def test_wheel_contains_the_runtime_package(outside_app):
    import zipfile

    names = set(zipfile.ZipFile(outside_app["wheel"]).namelist())
    assert set(RUNTIME_FILES) <= names
    assert {f"idempotent_runtime/{name}.py" for name in NOT_RUN_BY_THE_FUNCTION} <= names  # for producers
    assert "idempotent_runtime/handler.py" in names
    assert "idempotent_pipeline/pipeline.py" in names


def test_outside_app_imports_the_installed_wheel_not_the_checkout(outside_app):
    venv = outside_app["venv"].resolve()
    for module, path in outside_app["modules"].items():
        resolved = Path(path).resolve()
        assert resolved.is_relative_to(venv), f"{module} imported from {resolved}, not the fresh venv"
        assert not resolved.is_relative_to(REPO), f"{module} imported from the checkout"


def test_outside_app_asset_contains_the_installed_runtime(outside_app):
    key = _function(outside_app["template"])["Code"]["S3Key"].removesuffix(".zip")
    asset = outside_app["outdir"] / f"asset.{key}"
    files = {p.relative_to(asset).as_posix() for p in asset.rglob("*") if p.is_file()}
    installed = Path(outside_app["modules"]["idempotent_runtime"]).parent
    shipped = {  # the installed package, without the modules the function never imports (document mode)
        f"idempotent_runtime/{p.relative_to(installed).as_posix()}"
        for p in installed.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        if p.stem not in (*NOT_RUN_BY_THE_FUNCTION, "outbox", "relay")
        if f"{p.parent.name}/{p.stem}" not in OTHER_MODES
    }
    assert files == shipped
    assert {"idempotent_runtime/__init__.py", "idempotent_runtime/handler.py"} <= files
    for name in files:
        assert (asset / name).read_text() == without_docs((REPO / "lambda_src" / name).read_text()), name


def test_outside_app_uses_its_non_default_keys(outside_app):
    template = outside_app["template"]
    tables = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    assert [k["AttributeName"] for k in tables[0]["KeySchema"]] == ["tenant", "event_id"]
    env = _function(template)["Environment"]["Variables"]
    assert (env["PARTITION_KEY"], env["SORT_KEY"], env["TTL_ATTRIBUTE"]) == ("tenant", "event_id", "gone_at")
    assert (env["PARTITION_KEY_FIELD"], env["SORT_KEY_FIELD"], env["DEDUP_TTL_SECONDS"]) == (
        "tenant",
        "id",
        "172800",
    )
    assert _function(template)["Handler"] == "idempotent_runtime.handler.handler"
