"""The consumer's code asset holds code, not secrets: Python sources and what `include` names, less what
`exclude` names; the 250 MB limit; and the wheels of a requirements.txt installed at synth for the function's
architecture and Python (no network: pip reads a local wheelhouse)."""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
import tokenize
import zlib
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from constructs_helpers import files_under, function_asset_dir, new_stack, warnings_of

from idempotent_pipeline import (
    ConfigurationError,
    ConsumerOptions,
    IdempotencyTable,
    IdempotentConsumer,
    Messaging,
    Mode,
)
from idempotent_pipeline._asset import (
    CACHE_VARIABLE,
    LOCAL_PYTHON_VARIABLE,
    MAX_UNZIPPED_BYTES,
    Target,
    stage_asset,
    without_docs,
)

RUNTIME_SOURCE = Path(__file__).resolve().parents[2] / "lambda_src" / "idempotent_runtime"
PROCESSOR = "def handle(message, table):\n    return None\n"


def _asset_files(code_directory: Path, **options: Any) -> set[str]:
    made = consumer(processor="orders:handle", code_directory=str(code_directory), **options)
    return files_under(function_asset_dir(cdk.Stack.of(made)))


def consumer(**options: Any) -> IdempotentConsumer:
    stack = new_stack()
    messaging = Messaging(stack, "Messaging")
    return IdempotentConsumer(
        stack,
        "Consumer",
        queue=messaging.queue,
        table=IdempotencyTable(stack, "Table"),
        options=ConsumerOptions(**options),
    )


def _runtime_files(*imported: str, mode: str = "document") -> set[str]:
    """The runtime's files as the asset holds them: without the modules the function never imports (the
    producer helper, the DLQ tool's record inspection, the test helper, the workflow and durable execution
    starters) unless the
    user's code names them, and without the other modes' modules (all modes when it names the record
    inspection); never the outbox or the relay (a consumer that does not emit)."""
    shipped = {mode, "document"} if mode == "versioned" else {mode}  # versioned builds on document mode
    other_modes = set() if "records" in imported else {m.value for m in Mode} - shipped
    return {
        f"idempotent_runtime/{p.relative_to(RUNTIME_SOURCE).as_posix()}"
        for p in RUNTIME_SOURCE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        if p.stem not in ("publisher", "records", "testing", "workflows", "durable") or p.stem in imported
        if not (p.parent.name == "modes" and p.stem in other_modes)
        if p.stem not in ("outbox", "relay")
    }


VERSION = {m.value: "v" if m == Mode.VERSIONED else None for m in Mode}  # versioned mode's required field


@pytest.mark.parametrize("mode", [m.value for m in Mode])
def test_the_asset_holds_the_configured_modes_module_only_and_its_handler_starts(tmp_path, mode):
    (tmp_path / "orders.py").write_text("def handle(message):\n    return []\n")
    made = consumer(
        mode=mode, processor="orders:handle", code_directory=str(tmp_path), version_field=VERSION[mode]
    )
    asset = function_asset_dir(cdk.Stack.of(made))
    assert {f for f in files_under(asset) if f.startswith("idempotent_runtime/")} == _runtime_files(mode=mode)
    # The cold start of the function as deployed: the handler imports, with this mode and the processor,
    # from the asset alone (-S: no site-packages, where this checkout's runtime is installed).
    environment = {
        "TABLE_NAME": "orders",
        "IDEMPOTENCY_MODE": mode,
        "PROCESSOR": "orders:handle",
        **({"VERSION_FIELD": VERSION[mode]} if VERSION[mode] else {}),
        "AWS_DEFAULT_REGION": "us-east-1",
        "PATH": os.environ.get("PATH", ""),
    }
    cold_start = "import sys; sys.path.insert(0, ''); import idempotent_runtime.handler"
    started = subprocess.run(
        [sys.executable, "-I", "-S", "-c", cold_start],
        cwd=asset,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode == 0, started.stderr


def test_asset_without_user_code_is_exactly_the_runtime():
    stack = new_stack()
    messaging = Messaging(stack, "Messaging")
    IdempotentConsumer(stack, "Consumer", queue=messaging.queue, table=IdempotencyTable(stack, "Table"))
    files = files_under(function_asset_dir(stack))
    assert {"idempotent_runtime/__init__.py", "idempotent_runtime/handler.py"} <= files
    assert files == _runtime_files()


def _code_of(source: str) -> str:
    """The module's syntax tree with every docstring emptied: what it runs, whatever its docs."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and first.value.value:
            first.value.value = "" if isinstance(first.value.value, str) else first.value.value
    return ast.dump(tree)


def test_the_runtime_ships_without_docstrings_and_comments_line_for_line():
    stack = new_stack()
    IdempotentConsumer(
        stack, "Consumer", queue=Messaging(stack, "Messaging").queue, table=IdempotencyTable(stack, "Table")
    )
    asset = function_asset_dir(stack)
    shipped = sorted(f for f in files_under(asset) if f.endswith(".py"))
    assert "idempotent_runtime/flow.py" in shipped
    before = after = 0
    for name in shipped:
        source = (RUNTIME_SOURCE.parent / name).read_text()
        deployed = (asset / name).read_text()
        assert deployed == without_docs(source), name
        # The same code on the same lines: a traceback from Lambda points at the package's source.
        assert _code_of(deployed) == _code_of(source), name
        assert deployed.count("\n") == source.count("\n"), name
        tokens = tokenize.generate_tokens(io.StringIO(deployed).readline)
        assert not [t.string for t in tokens if t.type == tokenize.COMMENT], name
        before, after = (
            before + len(zlib.compress(source.encode(), 9)),
            after + len(zlib.compress(deployed.encode(), 9)),
        )
    assert after < 0.8 * before


def test_the_stripped_runtime_is_written_once_and_linked_by_later_synths(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    target = Target("3.14", "arm64")
    first, _ = stage_asset(None, (), (), target, Mode.DOCUMENT)
    second, _ = stage_asset(None, (), (), target, Mode.DOCUMENT)
    flow = "idempotent_runtime/flow.py"
    assert (Path(first) / flow).read_text() == without_docs((RUNTIME_SOURCE / "flow.py").read_text())
    assert (Path(first) / flow).stat().st_ino == (Path(second) / flow).stat().st_ino
    cached = {p.name for p in (tmp_path / "cache" / "runtime").iterdir()}
    assert len(cached) == len([f for f in files_under(Path(first)) if f.endswith(".py")])


def test_stripping_keeps_strings_that_look_like_comments_and_one_line_bodies():
    source = (
        'def f():\n    """Doc."""\n\n\n'
        'def g():\n    """Doc\n    on two lines."""  \n    # why\n    return "#not a comment"  # a comment\n'
    )
    stripped = without_docs(source)
    assert stripped == 'def f():\n    ""\n\n\ndef g():\n    ""\n\n\n    return "#not a comment"\n'
    namespace: dict[str, Any] = {}
    exec(compile(stripped, "m", "exec"), namespace)
    assert (namespace["f"](), namespace["g"]()) == (None, "#not a comment")


# Credential files users keep beside their code (none hidden by a leading dot is safe by name alone).
CREDENTIALS = {
    ".git-credentials": "https://user:token@example.com\n",
    ".docker/config.json": '{"auths": {"registry": {"auth": "c2VjcmV0"}}}',
    ".kube/config": "users:\n- user: {token: secret}\n",
    ".pgpass": "db:5432:*:user:secret\n",
    ".boto": "[Credentials]\naws_secret_access_key = secret\n",
    ".htpasswd": "user:$apr1$secret\n",
    "terraform.tfstate": '{"secret": "state"}',
    "prod.tfvars": 'password = "secret"\n',
    ".terraform/providers/registry/state": "secret",
    "server.key": "KEY",
    "cert.pem": "KEY",
    "keystore.p12": "KEY",
    "keystore.jks": "KEY",
    "credentials.json": '{"secret": "key"}',
    "service-account.json": '{"private_key": "secret"}',
    ".env": "API_KEY=secret\n",
    ".env.production": "API_KEY=prod-secret\n",
    ".envrc": "export TOKEN=secret\n",
    ".npmrc": "//registry.npmjs.org/:_authToken=secret\n",
    ".pypirc": "[pypi]\npassword = secret\n",
    ".netrc": "machine example.com password secret\n",
    ".aws/credentials": "[default]\naws_secret_access_key = secret\n",
    ".ssh/id_rsa": "KEY",
    "id_rsa": "KEY",
    "id_ed25519.pub": "KEY",
    "deploy-key.pem": "KEY",
    ".secrets.toml": "token = 'secret'\n",
}


@pytest.fixture(scope="session")
def cluttered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project directory as users have them: code beside data, credentials, version control,
    environments, build output and caches."""
    root = tmp_path_factory.mktemp("project")
    files = {
        **CREDENTIALS,
        "orders.py": PROCESSOR,
        "helpers/__init__.py": "VALUE = 1\n",
        "helpers/rates.json": "{}",
        "config/settings.toml": "region = 'eu-west-1'\n",
        ".git/config": "[core]\n",
        ".git/objects/ab/cdef": "blob",
        ".git/hooks/pre-commit.py": "",
        ".aws-sam/build/x.py": "",
        ".hidden/module.py": "",
        ".venv/lib/python3.11/site-packages/x.py": "",
        "venv/pyvenv.cfg": "home = /usr\n",
        "venv/lib/python3.11/site-packages/y.py": "",
        "my-env/pyvenv.cfg": "home = /usr\n",
        "my-env/lib/python3.11/site-packages/big.py": "",
        "node_modules/left-pad/index.js": "",
        "node_modules/left-pad/build.py": "",
        "cdk.out/asset.1234/orders.py": PROCESSOR,
        "__pycache__/orders.cpython-311.pyc": "",
        "helpers/__pycache__/x.cpython-311.pyc": "",
        "stale.pyc": "",
        ".pytest_cache/v/cache/lastfailed": "{}",
        ".mypy_cache/3.11/x.json": "{}",
        ".ruff_cache/x": "",
        ".tox/py311/x": "",
        ".coverage": "",
        ".idea/workspace.xml": "",
        ".vscode/settings.json": "{}",
        ".DS_Store": "",
        "orders.egg-info/PKG-INFO": "",
        "orders.egg-info/setup.py": "",
        "docs/guide.md": "# guide\n",
        "docs/api/index.md": "# api\n",
        "data/big.csv": "a,b\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _user_files(code_directory: Path, **options: Any) -> set[str]:
    return {f for f in _asset_files(code_directory, **options) if not f.startswith("idempotent_runtime/")}


def test_only_python_sources_ship_by_default(cluttered):
    """Everything but what a deny-list named used to ship: terraform state, keys, service-account files."""
    assert _user_files(cluttered) == {"orders.py", "helpers/__init__.py"}


@pytest.mark.parametrize("name", sorted(CREDENTIALS))
def test_no_credential_file_ships(cluttered, name):
    assert name not in _asset_files(cluttered)


def test_python_sources_in_hidden_directories_environments_and_build_output_do_not_ship(cluttered):
    files = _asset_files(cluttered, include=["*.json"])
    for path in (
        ".git/hooks/pre-commit.py",
        ".aws-sam/build/x.py",
        ".hidden/module.py",
        ".venv/lib/python3.11/site-packages/x.py",
        "venv/lib/python3.11/site-packages/y.py",
        "my-env/lib/python3.11/site-packages/big.py",
        "node_modules/left-pad/build.py",
        "cdk.out/asset.1234/orders.py",
        "orders.egg-info/setup.py",
        ".docker/config.json",  # include never reaches into hidden directories
        ".mypy_cache/3.11/x.json",
    ):
        assert path not in files, path


def test_include_ships_data_files_by_name_path_or_directory(cluttered):
    user_files = _user_files(cluttered, include=["helpers/*.json", "data", "*.md"])
    assert user_files == {
        "orders.py",
        "helpers/__init__.py",
        "helpers/rates.json",
        "data/big.csv",
        "docs/guide.md",
        "docs/api/index.md",
    }


def test_exclude_removes_sources_and_included_files(cluttered):
    user_files = _user_files(cluttered, include=["*.md", "*.toml"], exclude=["helpers", "docs/*.md"])
    # "docs/*.md" is a path pattern: it matches docs/guide.md, not docs/api/index.md.
    assert user_files == {"orders.py", "docs/api/index.md", "config/settings.toml"}


def _left_out_warnings(code_directory: Path, **options: Any) -> list[str]:
    made = consumer(processor="orders:handle", code_directory=str(code_directory), **options)
    return [
        m
        for _, m in warnings_of(cdk.Stack.of(made))
        if m.endswith("[ack: idempotent-pipeline:asset-left-out]")
    ]


def test_synth_names_the_files_it_left_out_and_how_to_ship_them(cluttered):
    (warning,) = _left_out_warnings(cluttered, exclude=["docs"])
    assert warning.startswith(
        "the function's code asset leaves out 14 file(s) of code_directory that are not Python sources: "
        "cert.pem, config/settings.toml, credentials.json, data/big.csv, deploy-key.pem, helpers/rates.json, "
        "id_ed25519.pub, id_rsa, keystore.jks, keystore.p12 and 4 more. Only *.py files and what "
        "ConsumerOptions.include names ship (e.g. include=['*.json'] or ['data']); list the rest in "
        "ConsumerOptions.exclude to leave them out without this warning"
    )
    # Names only: never a file's content, and nothing hidden, cached or excluded is named.
    assert "secret" not in warning and "KEY" not in warning
    for unnamed in (".env", "stale.pyc", "PKG-INFO", "docs/", "node_modules", ".git"):
        assert unnamed not in warning, unnamed


def test_no_warning_when_nothing_but_sources_is_left_out(user_code):
    assert _left_out_warnings(user_code) == []


def test_a_processor_in_a_virtualenv_fails_synth(tmp_path):
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "env" / "orders.py").write_text(PROCESSOR)
    with pytest.raises(
        ConfigurationError,
        match=r"^processor module 'env.orders' \(env/orders.py\) is left out of the asset: env is a "
        r"directory of dependencies, build output, caches or a virtualenv; the function could not import it$",
    ):
        consumer(processor="env.orders:handle", code_directory=str(tmp_path))


def test_a_code_directory_over_lambdas_250_mb_fails_at_synth(tmp_path):
    (tmp_path / "orders.py").write_text(PROCESSOR)
    (tmp_path / "models").mkdir()
    with open(tmp_path / "models" / "weights.bin", "wb") as sparse:  # no disk used: a sparse file
        sparse.truncate(MAX_UNZIPPED_BYTES + 1)
    with pytest.raises(ConfigurationError) as raised:
        _asset_files(tmp_path, include=["models"])
    message = str(raised.value)
    assert message.startswith("the function's code asset would be 262.")
    assert (
        "over Lambda's 250 MB limit (262144000 bytes); largest: code_directory: models/ 262.1 MB" in message
    )
    assert message.endswith(
        "Leave out what the function does not need with ConsumerOptions.exclude, or move it to a layer"
    )
    assert "models/weights.bin" not in _asset_files(tmp_path)  # data ships only when included


# -- requirements.txt ----------------------------------------------------------------------------------------


def _project(tmp_path: Path, requirements: str) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "orders.py").write_text(PROCESSOR)
    (directory / "requirements.txt").write_text(requirements)
    return directory


def test_requirements_are_installed_into_the_asset_from_wheels(tmp_path, offline_pip):
    files = _asset_files(_project(tmp_path, "tinyutil==1.0\n"))
    assert {"tinyutil/__init__.py", "tinyutil-1.0.dist-info/METADATA", "orders.py"} <= files
    assert "requirements.txt" not in files  # installed, not shipped: it may name a private index
    assert _runtime_files() <= files


def test_installed_requirements_are_cached_by_their_hash_and_target(
    tmp_path, offline_pip, wheelhouse, monkeypatch
):
    project = _project(tmp_path, "tinyutil==1.0\n")
    _asset_files(project)
    (cached,) = (offline_pip / "requirements").iterdir()
    # The same requirements for the same target: pip is not run again (there is no index to read from now).
    empty = tmp_path / "empty-index"
    empty.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    assert "tinyutil/__init__.py" in _asset_files(project)
    assert list((offline_pip / "requirements").iterdir()) == [cached]
    # Another target is another install.
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    assert "tinyutil/__init__.py" in _asset_files(project, architecture=lambda_.Architecture.X86_64)
    assert len(list((offline_pip / "requirements").iterdir())) == 2


def test_wheels_are_chosen_for_the_functions_architecture(tmp_path, offline_pip):
    """armonly publishes a manylinux aarch64 wheel only: fine on ARM_64 (the default), refused on X86_64."""
    project = _project(tmp_path, "armonly\n")
    assert "armonly/__init__.py" in _asset_files(project)
    with pytest.raises(ConfigurationError) as raised:
        _asset_files(project, architecture=lambda_.Architecture.X86_64)
    assert str(raised.value) == (
        f"{project / 'requirements.txt'}: no wheel of 'armonly' for the function (CPython 3.14, manylinux "
        "x86_64); "
        "requirements are installed at synth from wheels only (no compiler, no Docker): pin a version that "
        "publishes such a wheel, or ship the dependency in a layer"
    )


def test_wheels_are_chosen_for_the_functions_python(tmp_path, offline_pip):
    """armonly publishes a CPython 3.14 wheel only: refused for a function on python3.12."""
    project = _project(tmp_path, "armonly\n")
    with pytest.raises(ConfigurationError, match=r"no wheel of 'armonly' for the function \(CPython 3.12,"):
        _asset_files(project, runtime=lambda_.Runtime.PYTHON_3_12)


def _built_for(code_directory: Path) -> str:
    stack = cdk.Stack.of(consumer(processor="orders:handle", code_directory=str(code_directory)))
    return (function_asset_dir(stack) / "nativeonly" / "__init__.py").read_text()


def test_a_local_deploy_installs_requirements_for_the_python_that_runs_the_function_locally(
    tmp_path, offline_pip, monkeypatch
):
    """nativeonly publishes a binary wheel for the function's runtime (CPython 3.14, manylinux aarch64) and
    one for this Python: a synth for AWS bundles the first, a local deploy (naming its Python) the second."""
    project = _project(tmp_path, "nativeonly\n")
    assert _built_for(project) == "BUILT_FOR = 'lambda'\n"
    monkeypatch.setenv(LOCAL_PYTHON_VARIABLE, sys.executable)
    assert _built_for(project) == "BUILT_FOR = 'here'\n"
    assert len(list((offline_pip / "requirements").iterdir())) == 2  # cached apart


def test_a_local_deploy_names_the_local_python_when_no_wheel_fits_it(tmp_path, offline_pip, monkeypatch):
    monkeypatch.setenv(LOCAL_PYTHON_VARIABLE, sys.executable)
    with pytest.raises(ConfigurationError) as raised:
        _asset_files(_project(tmp_path, "armonly\n"))
    assert str(raised.value).startswith(
        f"{tmp_path / 'project' / 'requirements.txt'}: no wheel of 'armonly' for the Python that runs it "
        f"locally ({sys.executable}); "
    )


def test_a_dependency_without_a_wheel_fails_synth_naming_it(tmp_path, offline_pip):
    project = _project(tmp_path, "tinyutil==1.0\nsourceonly==1.0\n")
    with pytest.raises(ConfigurationError, match=r"no wheel of 'sourceonly==1.0' for the function"):
        _asset_files(project)
    assert not (offline_pip / "requirements").exists() or not [
        p for p in (offline_pip / "requirements").iterdir() if not p.name.startswith(".")
    ]


def test_requirements_may_not_bring_their_own_runtime(tmp_path, offline_pip):
    with pytest.raises(
        ConfigurationError, match=r"installs 'idempotent_runtime' \(e.g. idempotent-pipeline itself\)"
    ):
        _asset_files(_project(tmp_path, "shadow\n"))


def test_pip_errors_other_than_a_missing_wheel_are_reported(tmp_path, offline_pip):
    with pytest.raises(ConfigurationError, match=r"requirements.txt: pip could not install it:\n"):
        _asset_files(_project(tmp_path, "this is not a requirement ==\n"))


def test_an_included_requirements_file_is_part_of_the_cache_key_and_stays_out_of_the_asset(
    tmp_path, offline_pip
):
    """`-r base.txt`: a change in base.txt installs anew, and base.txt (which may name a private index with
    its credentials, like requirements.txt) is not shipped."""
    project = _project(tmp_path, "-r base.txt\n")
    (project / "base.txt").write_text("tinyutil==1.0\n")
    files = _asset_files(project)
    assert "tinyutil/__init__.py" in files
    assert "base.txt" not in files
    (project / "base.txt").write_text("armonly\n")
    files = _asset_files(project)
    assert "armonly/__init__.py" in files and "tinyutil/__init__.py" not in files


def test_nested_includes_and_constraints_are_hashed_relative_to_the_file_that_names_them(
    tmp_path, offline_pip
):
    project = _project(tmp_path, "--requirement=reqs/base.txt\n-c constraints.txt  # pins\n")
    (project / "reqs").mkdir()
    (project / "reqs" / "base.txt").write_text("-rcommon.txt\ntinyutil\n")
    (project / "reqs" / "common.txt").write_text("# shared by every function\n")
    (project / "reqs" / "notes.md").write_text("kept: not a requirements file\n")
    (project / "constraints.txt").write_text("tinyutil==1.0\n")
    files = _asset_files(project, include=["*.md", "*.txt"])
    assert "tinyutil/__init__.py" in files and "reqs/notes.md" in files
    # include cannot ship a requirements file: it may name a private index with its credentials
    assert not {"requirements.txt", "reqs/base.txt", "reqs/common.txt", "constraints.txt"} & files
    installs = offline_pip / "requirements"
    assert len([p for p in installs.iterdir() if not p.name.startswith(".")]) == 1
    (project / "reqs" / "common.txt").write_text("armonly\n")  # two levels down
    assert "armonly/__init__.py" in _asset_files(project)
    assert len([p for p in installs.iterdir() if not p.name.startswith(".")]) == 2


def test_a_processor_module_the_asset_leaves_out_fails_synth(tmp_path):
    (tmp_path / "orders.py").write_text("def handle(message):\n    return None\n")
    with pytest.raises(
        ConfigurationError,
        match=r"^processor module 'orders' \(orders.py\) is left out of the asset: orders.py matches",
    ):
        consumer(processor="orders:handle", code_directory=str(tmp_path), exclude=["orders.py"])


def test_a_package_is_read_before_a_module_of_the_same_name_as_python_imports_it(tmp_path):
    (tmp_path / "orders.py").write_text("def from_module(message):\n    return None\n")
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "__init__.py").write_text("def from_package(message):\n    return None\n")
    consumer(processor="orders:from_package", code_directory=str(tmp_path))  # what Python imports
    with pytest.raises(
        ConfigurationError, match=r"^processor 'orders:from_module': orders/__init__.py defines"
    ):
        consumer(processor="orders:from_module", code_directory=str(tmp_path))


def test_code_directory_may_be_a_path(tmp_path):
    (tmp_path / "orders.py").write_text("def handle(message):\n    return None\n")
    made = consumer(processor="orders:handle", code_directory=tmp_path)
    assert "orders.py" in files_under(function_asset_dir(made.node.scope))


@pytest.mark.parametrize(
    ("imports", "imported"),
    [
        ("import json\n", ()),
        ("from idempotent_runtime.publisher import dedup_id_for\n", ("publisher",)),
        ("from idempotent_runtime import (\n    PermanentError,\n    records,\n)\n", ("records",)),
        ("from idempotent_runtime import (  # the producer helper\n    publisher,\n)\n", ("publisher",)),
        ("from idempotent_runtime import \\\n    records\n", ("records",)),
        ("from idempotent_runtime.testing import message\n", ("testing",)),
        ("from idempotent_runtime.workflows import start_execution_once\n", ("workflows",)),
        # the durable starter runs the workflow starter's mechanism: both ship
        ("from idempotent_runtime.durable import start_durable_execution_once\n", ("durable", "workflows")),
        (
            "import importlib\nP = importlib.import_module('idempotent_runtime.' + 'publisher')\n",
            ("publisher",),
        ),
    ],
    ids=[
        "neither",
        "publisher",
        "records",
        "comment-in-parentheses",
        "continuation",
        "testing",
        "workflows",
        "durable",
        "import-module",
    ],
)
def test_the_asset_holds_the_producer_and_record_modules_only_when_the_code_imports_them(
    tmp_path, imports, imported
):
    (tmp_path / "orders.py").write_text(imports + "\n\ndef handle(message):\n    return None\n")
    files = _asset_files(tmp_path)
    assert {f for f in files if f.startswith("idempotent_runtime/")} == _runtime_files(*imported)
    assert "idempotent_runtime/handler.py" in files and "orders.py" in files
