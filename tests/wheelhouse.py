"""Wheels for tests that install requirements without a network: pip reads a directory of them
(PIP_FIND_LINKS)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# What the wheel is built from (a copy, so that nothing is written into the checkout).
SOURCES = (
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "idempotent_pipeline",
    "idempotent_local",
    "idempotent_cli",
)


def this_python_tag() -> str:
    """The tag of a binary wheel built for the Python running the tests, e.g. cp311-cp311-linux_x86_64."""
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{python}-{python}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"


def write_wheel(directory: Path, name: str, version: str, tag: str, files: dict[str, str]) -> Path:
    """A minimal but valid wheel (what pip needs: METADATA, WHEEL, RECORD with hashes)."""
    dist_info = f"{name}-{version}.dist-info"
    purelib = "true" if tag.endswith("none-any") else "false"
    contents = {
        **files,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: {purelib}\nTag: {tag}\n"
        ),
    }
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    wheel = directory / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel


def build_wheel(work: Path) -> Path:
    """The package's wheel, built from a copy of the checkout into ``work/dist`` (no download: the build
    tools of the running venv)."""
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(origin, source / name)
    shutil.copytree(REPO / "lambda_src", source / "lambda_src", ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check"]
    result = subprocess.run(
        [*command, "--outdir", str(work / "dist"), str(source)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"wheel build failed:\n{result.stdout}\n{result.stderr}"
    (wheel,) = (work / "dist").glob("idempotent_pipeline-*-py3-none-any.whl")
    return wheel


def install_wheel(wheel: Path, venv: Path, dependencies: list[Path]) -> Path:
    """A fresh venv with ``wheel`` and its ``local`` extra installed as the README says (``pip install
    "<wheel>[local]"``), without the network: pip installs the package alone, and its dependencies are
    borrowed from the ``dependencies`` site-packages directories, the first first (a .pth file)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--quiet",
        "--no-deps",
        "--no-index",
    ]
    subprocess.run([*pip, f"{wheel}[local]"], check=True, capture_output=True)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "project_dependencies.pth").write_text("".join(f"{d}\n" for d in dependencies))
    return venv


def user_environment(venv: Path, work: Path, **more: str) -> dict[str, str]:
    """The environment of a user of the installed wheel, outside the checkout: ``venv``'s scripts on PATH
    (nothing of the checkout's), HOME in ``work``, none of the project's Python, jsii or AWS settings, and the
    tool's cache in ``work/cache`` holding the pinned CDK CLI (the checkout's node_modules: no download)."""
    from idempotent_local.cdk import CACHE_ENV, CDK_CLI_VERSION

    cache = work / "cache"
    (cache / f"cdk-{CDK_CLI_VERSION}").mkdir(parents=True)
    (cache / f"cdk-{CDK_CLI_VERSION}" / "node_modules").symlink_to(REPO / "node_modules")
    path = [p for p in os.environ["PATH"].split(os.pathsep) if not p.startswith(str(REPO))]
    own = ("PYTHON", "JSII_", "AWS_", "VIRTUAL_ENV", "MAKELEVEL")
    kept = {name: value for name, value in os.environ.items() if not name.startswith(own)}
    return {
        **kept,
        "PATH": os.pathsep.join([str(venv / "bin"), *path]),
        CACHE_ENV: str(cache),
        "HOME": str(work),
        **more,
    }


def assert_destroyed(destroyed: subprocess.CompletedProcess[str], app: Path, pid: int) -> None:
    """`local destroy` of the app succeeded: its emulator is no longer found, its process has ended."""
    from idempotent_local import emulator as emulators

    assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr
    assert emulators.find(app / ".local-cloud") is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    raise AssertionError(f"the emulator's process {pid} still runs")
