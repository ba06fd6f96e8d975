"""A pytest plugin that runs moto's own tests with the emulator's taught types and patches installed.

The emulator may only move moto toward AWS, so moto's tests for the services it changes still pass (apart
from those that pin what AWS does differently, listed in docs/local-cloud.md). With moto's source of the
installed version (its sdist ships ``tests/``)::

    cd moto-5.2.5 && python -m pytest -p idempotent_local.moto_suite -o addopts="" \\
        tests/test_sqs tests/test_sns tests/test_dynamodb tests/test_cloudformation

(moto's tests also need ``freezegun``.)
"""

from __future__ import annotations

from typing import Any


def pytest_configure(config: Any) -> None:
    from idempotent_local import server

    server.install()
