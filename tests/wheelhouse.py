"""Wheels for tests that install requirements without a network: pip reads a directory of them
(PIP_FIND_LINKS)."""

from __future__ import annotations

import base64
import hashlib
import sys
import sysconfig
import zipfile
from pathlib import Path


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
