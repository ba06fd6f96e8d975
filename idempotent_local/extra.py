"""The ``local`` extra: the emulator needs moto's server, which the constructs alone do not install.

:func:`require_moto` raises :class:`MissingExtra` with the install line that works for *this* installation:
the wheel or checkout it was installed from (pip records it in ``direct_url.json``), else moto itself.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
import urllib.parse
import urllib.request

DISTRIBUTION = "idempotent-pipeline"
EXTRA = "local"
MOTO_REQUIREMENT = "moto[server]>=5.2,<6"


class MissingExtra(ImportError):
    """The local cloud was asked for, but moto (the ``local`` extra) is not installed."""


def installed_from() -> str | None:
    """The wheel file or source directory this distribution was installed from, if pip recorded one."""
    try:
        text = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        url = json.loads(text or "{}").get("url", "")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None
    if not url.startswith("file:"):
        return None
    return urllib.request.url2pathname(urllib.parse.urlparse(url).path)


def install_line() -> str:
    """A pip command that adds the ``local`` extra to the Python running this."""
    pip = f"{sys.executable} -m pip install"
    origin = installed_from()
    if origin:
        return f'{pip} "{origin}[{EXTRA}]"'
    return f'{pip} "{MOTO_REQUIREMENT}"'


def message() -> str:
    return (
        f"the local cloud needs the `{EXTRA}` extra of {DISTRIBUTION} (moto's server), which is not "
        f"installed in {sys.prefix}. Install it with:\n    {install_line()}"
    )


def moto_installed() -> bool:
    """Whether the ``local`` extra is installed: moto, and packaging (local run reads wheel tags with it).
    Found, not imported: importing moto takes most of a second, which a command that only talks to the
    emulator does not need."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in ("moto", "packaging.tags"))
    except (ImportError, ValueError):
        return False


def require_moto() -> None:
    if not moto_installed():
        raise MissingExtra(message())
