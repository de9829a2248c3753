"""The server's ``Date`` is the second it answers in, as DynamoDB's is: clients read the
server's time from it (the layer's clock-skew estimate, docs/guarantees.md "Clocks"), and a
header renewed only once a second by uvicorn's main loop was up to a second older than that."""

from __future__ import annotations

import math
import time
from email.utils import parsedate_to_datetime

import httpx

from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import ServerThread


def test_every_answer_is_dated_in_the_second_it_was_asked_or_later(engine: Engine) -> None:
    stale: list[tuple[float, float, float]] = []
    answers = 0
    with ServerThread(engine) as url, httpx.Client(base_url=url) as http:
        ends = time.time() + 2.5  # every phase of a second, twice over
        while time.time() < ends:
            sent = time.time()
            response = http.get("/")
            received = time.time()
            dated = parsedate_to_datetime(response.headers["date"]).timestamp()
            answers += 1
            # The header has whole seconds: the answer's second is at least the one the
            # request was sent in, and not after the one it came back in.
            if not math.floor(sent) <= dated <= received:
                stale.append((sent, dated, received))
            time.sleep(0.005)
    assert answers > 100
    assert stale == [], f"{len(stale)} of {answers} answers dated outside their second"
