"""The local cache (``IdempotencyConfig(local_cache_size=n)``).

Duplicates of finished requests answered from memory, with no DynamoDB call.

Safe because a finished record (COMPLETED, or FAILED for good) never changes within its
retention, and an entry is used only until the record's ``expires_at``. A mismatching
fingerprint is never answered here: DynamoDB gives that answer.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..outcomes import Replay
from ..requests import same_request


class ReplayCache:
    """An LRU of finished records' replays, keyed by record id; thread-safe."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._data: OrderedDict[str, tuple[str | None, Replay]] = OrderedDict()

    def get(self, record_id: str, fp: str, now: float) -> Replay | None:
        with self._lock:
            hit = self._data.get(record_id)
            if hit is None:
                return None
            stored_fp, replay = hit
            if replay.expires_at < int(now) or not same_request(stored_fp, fp):
                return None  # expired or a mismatch: let DynamoDB give the answer
            self._data.move_to_end(record_id)
            return replay

    def put(self, fp: str | None, replay: Replay) -> None:
        with self._lock:
            self._data[replay.record_id] = (fp, replay)
            self._data.move_to_end(replay.record_id)
            while len(self._data) > self.size:
                self._data.popitem(last=False)
