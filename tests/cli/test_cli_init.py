"""`idempotent-pipeline init DIR`: the app it writes (tests/cli/test_cli_wheel.py deploys one)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from idempotent_cli import init
from idempotent_cli.main import main
from idempotent_local.cdk import CDK_CLI_VERSION

ROOT = Path(__file__).resolve().parents[2]
FILES = {
    ".gitignore",
    "README.md",
    "app.py",
    "cdk.json",
    "package.json",
    "pytest.ini",
    "requirements.txt",
    "src/orders.py",
    "tests/test_orders.py",
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("apps") / "my-orders"
    assert main(["init", str(directory)]) == 0
    return directory


def test_init_writes_a_cdk_app_with_a_processor_and_its_test(
    app: Path, capsys: pytest.CaptureFixture
) -> None:
    written = {p.relative_to(app).as_posix() for p in app.rglob("*") if p.is_file()}
    assert written == FILES
    app_py = (app / "app.py").read_text()
    assert 'MyOrdersStack(app, "MyOrders")' in app_py
    # The constructs' options objects, one per block, and a topic for the alarms (else they notify nobody).
    for name in ("AlarmOptions", "ConsumerOptions", "IdempotentPipeline", "MessagingOptions", "TableOptions"):
        assert f"    {name},\n" in app_py
    assert "alarm_options=AlarmOptions(alarm_topic=alarm_topic)" in app_py
    assert '"AlarmTopicArn": alarm_topic.topic_arn' in app_py
    assert 'partition_key_name="order_id", sort_key_name="line_id", encryption_key=data_key' in app_py
    assert 'processor="orders:handle"' in app_py
    assert '"SubscriptionDeadLetterQueueUrl": pipeline.subscription_dead_letter_queue.queue_url' in app_py
    assert "__" not in app_py.replace("__init__", "").replace("__file__", "")  # every placeholder filled
    assert os.access(app / "app.py", os.X_OK)


def test_the_apps_gitignore_leaves_out_the_local_cloud_and_what_is_built(app: Path, tmp_path: Path) -> None:
    app = Path(shutil.copytree(app, tmp_path / "app"))
    ignored = (app / ".gitignore").read_text().splitlines()
    for entry in (".local-cloud/", ".venv/", "cdk.out/", "node_modules/", "__pycache__/"):
        assert entry in ignored
    listed = subprocess.run(  # git, as a user's repository sees the app after a deploy and a test run
        ["git", "init", "-q", "."], cwd=app, capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        pytest.skip(f"git is not usable here: {listed.stderr}")
    for made in (".local-cloud/logs/f.log", "cdk.out/Shop.template.json", "src/__pycache__/orders.pyc"):
        (app / made).parent.mkdir(parents=True, exist_ok=True)
        (app / made).write_text("")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=app, capture_output=True, text=True
    )
    assert status.returncode == 0, status.stderr
    untracked = {line[3:] for line in status.stdout.splitlines()}
    assert untracked == {".gitignore", *sorted(FILES - {".gitignore"})}


def test_the_apps_synth_prints_no_node_banner(app: Path, tmp_path: Path) -> None:
    """`npx cdk synth` in the app runs `python3 app.py`: with Node 20, jsii printed its end-of-life banner
    there, as Python byte strings (b'!!!...'), unless the shell had the silencing variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JSII_", "PYTHONPATH"))}
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=app,
        env={**env, "CDK_OUTDIR": str(tmp_path / "cdk.out")},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cdk.out" / "MyOrders.template.json").exists()
    assert "end-of-life" not in result.stderr and "b'!!" not in result.stderr, result.stderr


def test_cdk_json_has_the_recommended_feature_flags_of_the_reference_app(app: Path) -> None:
    ours = json.loads((ROOT / "cdk.json").read_text())
    theirs = json.loads((app / "cdk.json").read_text())
    assert theirs["app"] == "python3 app.py"
    assert theirs["context"] == ours["context"]
    assert ".local-cloud" in theirs["watch"]["exclude"]


def test_package_json_pins_the_cli_the_tool_runs(app: Path) -> None:
    package = json.loads((app / "package.json").read_text())
    assert package["name"] == "my-orders"
    assert package["devDependencies"] == {"aws-cdk": CDK_CLI_VERSION}


def test_requirements_name_this_idempotent_pipeline_portably_with_the_local_extra(
    app: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    text = (app / "requirements.txt").read_text()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    version = importlib.metadata.version("idempotent-pipeline")
    assert lines == [f"idempotent-pipeline[local]=={version}", "pytest>=8"]
    # Nothing of this machine: the file works on CI and on a colleague's machine, shown the wheel.
    assert "file:" not in text and str(ROOT) not in text and str(Path.home()) not in text
    assert "--find-links DIR" in text
    wheel = tmp_path / "dist" / "idempotent_pipeline-0.1.0-py3-none-any.whl"
    monkeypatch.setattr("idempotent_local.extra.installed_from", lambda: str(wheel))
    from_wheel = init.requirement()
    assert "installed from the wheel idempotent_pipeline-0.1.0-py3-none-any.whl." in from_wheel
    assert str(tmp_path) not in from_wheel and "file:" not in from_wheel


def test_the_generated_processor_test_passes(app: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=app,
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


def test_readme_and_next_steps_point_at_the_command_line_not_make(app: Path) -> None:
    readme = (app / "README.md").read_text()
    assert "idempotent-pipeline local deploy" in readme
    assert "make " not in readme
    assert f"`{CDK_CLI_VERSION}`" in readme


def test_init_refuses_a_directory_that_is_not_empty(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    assert main(["init", str(tmp_path / "taken")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'taken'} is not empty: it holds notes.txt." in err
    assert "only a virtualenv or .git" in err
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "taken" / "app.py").exists()


def test_init_dot_writes_the_app_beside_the_venv_the_readme_just_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    shop = tmp_path / "shop"
    (shop / ".venv" / "bin").mkdir(parents=True)
    (shop / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (shop / ".git").mkdir()
    monkeypatch.chdir(shop)
    assert main(["init", "."]) == 0
    out = capsys.readouterr().out
    assert (shop / "app.py").exists() and (shop / ".venv" / "pyvenv.cfg").exists()
    assert 'ShopStack(app, "Shop")' in (shop / "app.py").read_text()
    assert "    cd " not in out  # already there


def test_init_never_overwrites_a_file_of_the_app_even_beside_a_venv(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    shop = tmp_path / "shop"
    (shop / "venv").mkdir(parents=True)
    (shop / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (shop / "src").mkdir()
    assert main(["init", str(shop)]) == 1
    assert "it holds src/." in capsys.readouterr().err
    assert not (shop / "app.py").exists()


def test_init_help_is_plain_text() -> None:
    helped = subprocess.run(
        [sys.executable, "-m", "idempotent_cli", "init", "--help"], capture_output=True, text=True, check=True
    )
    assert "``" not in helped.stdout and ":data:" not in helped.stdout
    assert "requirements.txt" in helped.stdout and "virtualenv" in helped.stdout


@pytest.mark.parametrize(
    ("directory", "stack"),
    [("my-orders", "MyOrders"), ("shop", "Shop"), ("2fast", "App2fast"), ("a_b.c", "ABC")],
)
def test_the_stack_is_named_after_the_directory(directory: str, stack: str) -> None:
    assert init.stack_name(Path("/somewhere") / directory) == stack
