"""Can this Python import the packages installed in a function's code?

pip records the tags of every wheel it installs in ``<name>-<version>.dist-info/WHEEL``
(``Tag: cp314-cp314-manylinux_2_17_aarch64``). Code bundled for the function's runtime in AWS (another
Python version, another architecture) holds compiled modules this Python cannot import, and the function's
first import would fail on them with an error that does not say why. The runner asks :func:`foreign` first
and names the mismatch instead.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path


def this_python() -> str:
    """This interpreter as a person reads it: ``CPython 3.11 x86_64``."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return f"{platform.python_implementation()} {version} {platform.machine()}"


def foreign(code_dir: Path) -> list[str]:
    """``name version (tags)`` of each distribution installed in ``code_dir`` whose wheel no tag of this
    Python matches (pure-Python wheels match every Python 3)."""
    from packaging.tags import Tag, parse_tag, sys_tags

    supported = set(sys_tags())
    found = []
    for wheel in sorted(code_dir.glob("*.dist-info/WHEEL")):
        tags: set[Tag] = set()
        for line in wheel.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Tag" and value.strip():
                tags |= parse_tag(value.strip())
        if tags and not tags & supported:
            name, _, version = wheel.parent.name.removesuffix(".dist-info").partition("-")
            found.append(f"{name} {version} ({', '.join(sorted(str(tag) for tag in tags))})")
    return found
