"""The environment every process the local tool starts gets, so Node's banners stay out of its output.

Node 20 is end-of-life: jsii (inside a CDK app's synth) prints a banner on every start unless
``JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION`` / ``..._DEPRECATED_NODE_VERSION`` hold the *running* Node
major version (``1`` does nothing); the AWS SDK for JavaScript inside the CDK CLI prints its own
NodeVersionSupportWarning unless told not to.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

QUIET = {
    "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED": "true",
    "AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE": "1",
    "CDK_DISABLE_CLI_TELEMETRY": "true",
    "NPM_CONFIG_UPDATE_NOTIFIER": "false",
    "NPM_CONFIG_FUND": "false",
    "NPM_CONFIG_AUDIT": "false",
}


# The variables of :func:`quiet_environment` that only silence banners (no npm or CDK setting).
BANNER_VARIABLES = frozenset(
    {
        "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED",
        "AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION",
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION",
    }
)


@functools.lru_cache(maxsize=8)
def node_major(path: str | None = None) -> str:
    """The major version of the ``node`` on ``path`` (default: this process's PATH), or "" without one."""
    node = shutil.which("node", path=path)
    if not node:
        return ""
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, check=False, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.strip().lstrip("v").split(".")[0]


def quiet_environment(path: str | None = None) -> dict[str, str]:
    """Variables that keep Node's and jsii's notices out of a process that runs with ``PATH=path``."""
    major = node_major(path if path is not None else os.environ.get("PATH"))
    env = dict(QUIET)
    if major:
        env["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = major
        env["JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION"] = major
    return env
