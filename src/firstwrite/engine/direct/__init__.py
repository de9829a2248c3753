"""The direct client: boto3's low-level method names and shapes over the engine's front door.

No JSON on the way (``client``), its errors made as botocore makes them (``errors``), and its
check for text that no encoding carries (``surrogates``)."""

from __future__ import annotations

from .client import DirectClient, client_error

__all__ = ["DirectClient", "client_error"]
