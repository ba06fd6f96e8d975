"""The client of the emulator's control API (:mod:`idempotent_local.control_api`, beside moto's own API on
the emulator's port): ``Emulator.control``. What the tools ask the emulator for in one request instead of
many, and the clock a test or a user moves ahead."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from idempotent_local.names import CONTROL_PATH as PATH


def code_location(endpoint: str, function_arn: str) -> str:
    """Where the zip of the function ``function_arn`` (qualified for a version) downloads from."""
    return f"{endpoint}{PATH}/functions/code?" + urllib.parse.urlencode({"function": function_arn})


class ControlError(RuntimeError):
    """The emulator refused a control request; the message is its answer."""


class Control:
    """The control API of the emulator at ``endpoint`` (``http://localhost:PORT``)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def _call(self, name: str, body: dict[str, Any] | None = None, **query: Any) -> Any:
        url = f"{self.endpoint}{PATH}/{name}"
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            answer = error.read().decode(errors="replace")
            raise ControlError(f"{name}: HTTP {error.code}: {answer}") from None

    def inventory(self) -> dict[str, Any]:
        return dict(self._call("inventory"))

    def clock(self, advance_seconds: float | None = None) -> dict[str, Any]:
        """``{"offset_seconds": N, "ages": [...]}``: how far the emulator's clock is ahead of this machine's
        (0 until something moves it) and what moving it makes older, after moving it ``advance_seconds``
        ahead when given."""
        return dict(
            self._call("clock", None if advance_seconds is None else {"advance_seconds": advance_seconds})
        )

    def expired_records(self, stream_arn: str, shard_id: str, after: str | None) -> dict[str, Any]:
        """``{"Records": [...], "TrimHorizon": SEQUENCE | None}``: the shard's records after ``after`` that
        have left the stream (in ``GetRecords``' shape, ``ApproximateCreationDateTime`` in epoch seconds), and
        the sequence number of its oldest record still held (None: none is)."""
        return dict(self._call("streams/expired", stream=stream_arn, shard=shard_id, after=after))


__all__ = ["PATH", "Control", "ControlError", "code_location"]
