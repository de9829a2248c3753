"""The idempotency benchmark counts a library's DynamoDB calls on its own table only: a call
another library makes from its own thread during a contender's timed slice (idemkit's event
loop finishing an in-progress request after its caller got the conflict) is not that
contender's."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level package beside `src/`, not installed
    sys.path.insert(0, str(ROOT))

from bench import idempotency_contenders, idempotency_libraries  # noqa: E402

pytestmark = pytest.mark.xdist_group("bench")


@pytest.mark.parametrize("direct", [False, True], ids=["bound", "direct"])
def test_a_call_on_another_table_in_a_slice_is_not_counted(tmp_path: Path, direct: bool) -> None:
    shared = idempotency_libraries.Shared(tmp_path, direct=direct)
    try:
        shared.create_table("other-table", "id")
        scenario = idempotency_contenders.Scenario(
            shared, idempotency_libraries.FirstwriteLib, "first call"
        )
        scenario.setup()
        before = shared.counter.by_table["other-table"]  # its CreateTable
        scenario.resume()
        scenario.op(1)  # two calls on firstwrite's table
        # another library's late call, from its own thread, inside firstwrite's slice
        late = threading.Thread(
            target=shared.client.put_item,
            kwargs={"TableName": "other-table", "Item": {"id": {"S": "late"}}},
        )
        late.start()
        late.join()
        scenario.pause()
        assert scenario.requests == 1
        assert scenario.calls == 2
        assert shared.counter.by_table["other-table"] == before + 1
        # the total over the shared client still sees every call (the middleware bench's count)
        assert shared.counter.total >= 3
        scenario.teardown()
    finally:
        shared.close()
