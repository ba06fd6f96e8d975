"""An app a team already has, with the pipeline added (``examples/existing_app``: a bucket with a TLS-only
policy and auto-deleted objects, a REST API in front of a function that publishes to the pipeline's topic, an
SSM parameter and a secret), in an empty directory outside the checkout, with the built wheel installed as
the README says, at the oldest aws-cdk-lib the library supports and at the newest: ``local deploy`` (exit 0,
the custom resource it cannot run named in a note), a request through the API's URL, ``local run --drain``
(the order's lines in the table), ``local status``, ``local destroy``.

The wheel goes into a fresh venv; aws-cdk-lib, moto and the rest come from the project's venv, or first from
``.venv-floor`` for the floor (a .pth file: no download). The pinned CDK CLI comes from the tool's cache,
pre-filled from the checkout's node_modules. The tests of a version run in order and share its app.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from idempotent_local import emulator as emulators
from tests.wheelhouse import REPO, assert_destroyed, build_wheel, install_wheel, user_environment

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "existing_app"
FLOOR = REPO / ".venv-floor"
ORDER = {
    "order_id": "o-1",
    "lines": [{"line_id": "1", "sku": "tea", "quantity": 2}, {"line_id": "2", "sku": "cocoa", "quantity": 1}],
}

if not (REPO / "node_modules" / ".bin" / "cdk").exists():
    pytest.skip("the pinned CDK CLI is not installed (make setup installs it)", allow_module_level=True)


def _site_packages(venv: Path) -> Path:
    (found,) = (venv / "lib").glob("python3*/site-packages")
    return found


@dataclass
class App:
    directory: Path
    env: dict[str, str]
    flavour: str  # "floor" or "newest"
    cdk_lib: str  # the version the app's venv imports
    steps: set[str] = field(default_factory=set)
    printed: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["idempotent-pipeline", *args],
            cwd=self.directory,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )

    def step(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        self.printed[name] = result = self.run(*args)
        self.steps.add(name)
        return result

    def after(self, step: str) -> subprocess.CompletedProcess[str]:
        if step not in self.steps:
            pytest.fail(f"this test builds on {step!r}, which did not run before it in this process")
        return self.printed[step]

    @property
    def emulator(self) -> emulators.Emulator:
        found = emulators.find(self.directory / ".local-cloud")
        assert found is not None, "the app's emulator is not running"
        return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module", params=["newest", "floor"])
def app(
    request: pytest.FixtureRequest, wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[App]:
    work = tmp_path_factory.mktemp(f"existing-{request.param}")
    dependencies = [Path(sysconfig.get_paths()["purelib"])]
    if request.param == "floor":
        if not FLOOR.exists():
            pytest.skip("no .venv-floor (make test-floor creates it)")
        dependencies.insert(0, _site_packages(FLOOR))  # its aws-cdk-lib, constructs and jsii come first
    venv = install_wheel(wheel, work / "venv", dependencies)
    directory = work / "shopfront"
    shutil.copytree(EXAMPLE, directory)  # the app, in a directory of its own outside the checkout
    env = user_environment(venv, work)
    version = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import aws_cdk, importlib.metadata as m; print(m.version('aws-cdk-lib'))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    app = App(directory, env, request.param, version)
    try:
        yield app
    finally:
        emulators.stop(directory / ".local-cloud")


def test_the_app_runs_on_the_aws_cdk_lib_it_is_meant_for(app: App) -> None:
    import importlib.metadata
    import tomllib

    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (lib,) = [d for d in dependencies if d.startswith("aws-cdk-lib")]
    floor = lib.split(">=")[1].split(",")[0]  # 2.156.0: the oldest the library supports
    assert app.cdk_lib == (floor if app.flavour == "floor" else importlib.metadata.version("aws-cdk-lib"))


def test_local_deploy_deploys_every_resource_and_names_the_custom_resource_it_does_not_run(app: App) -> None:
    deployed = app.step("deploy", "local", "deploy")

    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    assert "Shopfront: CREATE_COMPLETE" in deployed.stdout
    assert "    ! " not in deployed.stdout  # nothing missing
    notes = [line.strip() for line in deployed.stdout.splitlines() if line.strip().startswith("note: ")]
    assert len(notes) == 1, deployed.stdout
    assert (
        "(Custom::S3AutoDeleteObjects) was not created: the emulator does not run custom resources"
        in notes[0]
    )


def test_a_request_through_the_api_publishes_the_orders_lines_to_the_pipeline(app: App) -> None:
    app.after("deploy")
    url = app.run("local", "output", "ApiUrl").stdout.strip()

    answered = app.step("request", "local", "request", "POST", f"{url}orders", "--data", json.dumps(ORDER))

    assert answered.returncode == 0, answered.stdout + answered.stderr
    assert json.loads(answered.stdout) == {
        "accepted": "o-1",
        "lines": 2,
        "message": "thank you for your order",
    }
    assert answered.stderr.startswith("HTTP 202 (POST /orders -> Shopfront-Api")
    bucket = app.run("local", "output", "BucketName").stdout.strip()
    upload = app.emulator.client("s3").get_object(Bucket=bucket, Key="orders/o-1.json")["Body"].read()
    assert json.loads(upload) == ORDER
    refused = app.run("local", "request", "POST", f"{url}orders", "--data", "{}")
    assert (refused.returncode, json.loads(refused.stdout)) == (
        1,
        {"error": "an order needs order_id and lines"},
    )
    missing = app.run("local", "request", "GET", f"{url}orders")
    assert missing.returncode == 1 and "has no GET method (POST)" in missing.stderr


def test_local_run_drain_stores_each_line_once(app: App) -> None:
    app.after("request")

    drained = app.step("drain", "local", "run", "--drain")

    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert drained.stdout.strip().splitlines()[-1].startswith("2 messages: 2 processed, 0 duplicate")
    table = app.run("local", "output", "TableName").stdout.strip()
    items = app.emulator.client("dynamodb").scan(TableName=table)["Items"]
    lines = {(i["order_id"]["S"], i["line_id"]["S"]): (i["sku"]["S"], i["quantity"]["N"]) for i in items}
    assert lines == {("o-1", "1"): ("tea", "2"), ("o-1", "2"): ("cocoa", "1")}


def test_local_status_shows_the_stack_and_its_note_and_exits_0(app: App) -> None:
    app.after("deploy")
    status = app.run("local", "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "note: UploadsAutoDeleteObjectsCustomResource" in status.stdout
    assert "    ApiUrl = https://" in status.stdout


def test_local_destroy_removes_the_stack_and_stops_the_emulator(app: App) -> None:
    app.after("deploy")
    pid = app.emulator.pid
    assert_destroyed(app.run("local", "destroy"), app.directory, pid)
