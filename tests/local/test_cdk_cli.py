"""The pinned CDK CLI: one version, found in the app or the tool's cache, installed there on first use, and a
failure that names the command that fixes it. npm and npx are stand-ins here: nothing is downloaded."""

from __future__ import annotations

import json
import shutil
import stat
import textwrap
from pathlib import Path

import pytest
from stack_helpers import local_deploy

from idempotent_local import cdk
from idempotent_local import emulator as emulators
from idempotent_local.cdk import CDK_CLI_VERSION, CdkError, find_cdk
from idempotent_local.emulator import Emulator
from idempotent_local.node import quiet_environment

ROOT = Path(__file__).resolve().parents[2]


def test_the_pinned_version_is_the_one_package_json_pins() -> None:
    package = json.loads((ROOT / "package.json").read_text())
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert package["devDependencies"]["aws-cdk"] == CDK_CLI_VERSION
    assert lock["packages"]["node_modules/aws-cdk"]["version"] == CDK_CLI_VERSION


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with node and stand-ins for npm / npx (each logs its arguments), and an empty cache."""
    bin_dir = tmp_path / "bin"
    real_node = shutil.which("node")
    if real_node is None:
        pytest.skip("node is not installed")
    bin_dir.mkdir()
    (bin_dir / "node").symlink_to(real_node)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv(cdk.CACHE_ENV, str(tmp_path / "cache"))
    return bin_dir


NPM_THAT_INSTALLS = """\
    #!/usr/bin/env bash
    echo "$@" >> "$(dirname "$0")/npm.calls"
    prefix="$3"
    mkdir -p "$prefix/node_modules/.bin"
    printf '#!/usr/bin/env bash\\necho cached cdk\\n' > "$prefix/node_modules/.bin/cdk"
    chmod +x "$prefix/node_modules/.bin/cdk"
    """

FAILING = """\
    #!/usr/bin/env bash
    echo "$@" >> "$(dirname "$0")/$(basename "$0").calls"
    echo "npm error network request to https://registry.npmjs.org/aws-cdk failed" >&2
    exit 1
    """


def test_the_apps_own_cli_comes_first(tools: Path, tmp_path: Path) -> None:
    app = tmp_path / "app"
    own = _executable(app / "node_modules" / ".bin" / "cdk", "#!/bin/sh\n")
    _executable(tools / "npm", FAILING)
    assert find_cdk(app) == [str(own)]
    assert not (tools / "npm.calls").exists()


def test_first_use_installs_the_pinned_cli_into_the_cache_then_reuses_it(tools: Path, tmp_path: Path) -> None:
    _executable(tools / "npm", NPM_THAT_INSTALLS)
    said: list[str] = []
    app = tmp_path / "app"
    app.mkdir()

    command = find_cdk(app, said.append)
    again = find_cdk(app, said.append)

    cached = tmp_path / "cache" / f"cdk-{CDK_CLI_VERSION}" / "node_modules" / ".bin" / "cdk"
    assert command == again == [str(cached)]
    (call,) = (tools / "npm.calls").read_text().splitlines()  # installed once
    words = call.split()
    assert words[:2] == ["install", "--prefix"]
    assert "--no-save" in words and f"aws-cdk@{CDK_CLI_VERSION}" == words[-1]
    assert said == [
        f"installing the CDK CLI aws-cdk@{CDK_CLI_VERSION} into {cached.parents[2]} (first use only)"
    ]


def test_without_the_registry_the_error_names_the_command_that_fixes_it(tools: Path, tmp_path: Path) -> None:
    _executable(tools / "npm", FAILING)
    _executable(tools / "npx", FAILING)
    app = tmp_path / "app"
    app.mkdir()
    with pytest.raises(CdkError) as error:
        find_cdk(app)
    message = str(error.value)
    cache = tmp_path / "cache" / f"cdk-{CDK_CLI_VERSION}"
    assert f"npm install --prefix {cache} --no-audit --no-fund --no-save --loglevel=error" in message
    assert f"aws-cdk@{CDK_CLI_VERSION}" in message
    assert "network request" in message  # npm's own complaint
    assert (tools / "npx.calls").read_text().split() == ["--yes", f"aws-cdk@{CDK_CLI_VERSION}", "--version"]
    assert not cache.exists()  # no half-installed CLI left behind


def test_npx_runs_the_exact_version_when_the_cache_cannot_be_written(tools: Path, tmp_path: Path) -> None:
    _executable(tools / "npm", FAILING)
    _executable(tools / "npx", f'#!/usr/bin/env bash\necho "{CDK_CLI_VERSION} (build 0000000)"\n')
    app = tmp_path / "app"
    app.mkdir()
    assert find_cdk(app) == [str(tools / "npx"), "--yes", f"aws-cdk@{CDK_CLI_VERSION}"]


def test_without_node_the_error_says_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(cdk.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(CdkError, match=r"needs Node.js .* `node` is not on PATH"):
        find_cdk(tmp_path)


def test_node_banners_are_silenced_with_the_running_major_version(tools: Path) -> None:
    (tools / "node").unlink()
    _executable(tools / "node", '#!/bin/sh\necho "v21.7.3"\n')  # whatever major runs, not a fixed one
    env = quiet_environment(str(tools))
    assert env["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] == "21"
    assert env["JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION"] == "21"
    assert env["AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED"] == "true"


# What the CDK CLI prints when the app's synth raises: Python's traceback, then the CLI's own line.
SYNTH_FAILS = """\
    #!/usr/bin/env bash
    cat <<'OUT'
    Traceback (most recent call last):
      File "/home/me/shop/app.py", line 54, in <module>
        ShopStack(app, "Shop")
      File "/home/me/shop/.venv/lib/python3.11/site-packages/jsii/_runtime.py", line 135, in __call__
        inst = super(JSIIMeta, cast(JSIIMeta, cls)).__call__(*args, **kwargs)
      File "/home/me/idempotent_pipeline/_rules.py", line 223, in enforce
        raise ConfigurationError(message)
    RAISED
    python3 app.py: Subprocess exited with error 1
    OUT
    exit 1
    """.replace(
    "RAISED",
    "idempotent_runtime.contract.ConfigurationError: ConsumerOptions.batch_size must be between 1 and 10 "
    "(FIFO queue); got 11",
)


def test_a_synth_error_is_said_first_and_the_traceback_stays_in_the_log(tmp_path: Path) -> None:
    app = tmp_path / "shop"
    (app / "cdk.json").parent.mkdir()
    (app / "cdk.json").write_text('{"app": "python3 app.py"}')
    _executable(app / "node_modules" / ".bin" / "cdk", SYNTH_FAILS)
    state = tmp_path / "state"
    with pytest.raises(cdk.CdkError) as raised:
        cdk.Cdk(Emulator(pid=0, port=1, state_dir=str(state)), app).deploy()
    assert str(raised.value) == (
        "the app failed in `cdk deploy --all --require-approval never`: ConfigurationError: "
        "ConsumerOptions.batch_size must be between 1 and 10 (FIFO queue); got 11\n"
        f"the traceback and the CLI's output: in {state / 'cdk-deploy.log'} (or run again with -v)"
    )
    assert "Traceback (most recent call last):" in (state / "cdk-deploy.log").read_text()


# An app adopting the library with its defaults: no alarm topic, no explicit table name (no flag in cdk.json).
WARNED_APP = """\
import aws_cdk as cdk

from idempotent_pipeline import IdempotentPipeline

app = cdk.App()
IdempotentPipeline(cdk.Stack(app, "Warned"), "Orders")
app.synth()
"""


@pytest.mark.integration
@pytest.mark.skipif(not (ROOT / "node_modules" / ".bin" / "cdk").exists(), reason="the pinned CDK CLI")
def test_local_deploy_shows_the_synth_warnings_of_the_library(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator, _ = emulators.start(state_dir)
    emulator.reset()  # other tests leave resources behind
    app = tmp_path / "warned"
    app.mkdir()
    (app / "app.py").write_text(WARNED_APP)
    (app / "cdk.json").write_text('{"app": "python3 app.py"}')
    assert local_deploy(state_dir, tmp_path, app=app) == 0
    printed = capsys.readouterr().out.splitlines()
    log = Path(state_dir).resolve() / "cdk-deploy.log"
    assert f"    3 synth warnings (the CLI's output: {log}):" in printed
    warnings = [line for line in printed if line.startswith("    warning: ")]
    assert [line.split(":", 2)[1].strip() for line in warnings] == [
        "Warned/Orders/Messaging",
        "Warned/Orders/Table",
        "Warned/Orders/Consumer",
    ]
    assert "the table's name is generated by CloudFormation" in warnings[1]
    assert warnings[1].endswith("(acknowledge with 'Annotation::idempotent-pipeline:replaceable-table')")
    assert "have no action: they fire in CloudWatch and notify nobody" in warnings[0]
