"""Reference cycles a call leaves behind: an error kept with its traceback (the engine's frames,
one holding the error) is a cycle per failed call, only freed by the garbage collector."""

from __future__ import annotations

import gc
import types
from collections.abc import Callable

from firstwrite.engine.errors import DynamoDBError


def cycles_left_by(run: Callable[[], None]) -> list[object]:
    """The engine errors and firstwrite frames that ``run`` left in reference cycles: the
    collector is off while it runs, then one collection keeps what it found
    (``DEBUG_SAVEALL``)."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return [
            o
            for o in gc.garbage
            if isinstance(o, DynamoDBError)
            or (isinstance(o, types.FrameType) and "firstwrite" in o.f_code.co_filename)
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
