"""An asyncio poller in its own process (for the SIGTERM and SIGKILL tests): argv = engine db,
SQS url, queue url, marks file, and optionally the visibility (default 5). Its handler writes
``start <body>``; for bodies starting with ``hang`` it then waits forever, else it works 2 s
and writes ``done <body>``. The process exits when :meth:`AsyncSQSPoller.run` returns."""

from __future__ import annotations

import asyncio
import sys

from aiobotocore.session import get_session

from firstwrite.engine import Engine, local_client
from firstwrite.events.async_sqs_poller import AsyncSQSPoller
from firstwrite.idempotency import AsyncIdempotency, IdempotencyConfig
from firstwrite.idempotency.aio import ThreadedClient


async def main() -> None:
    db, endpoint, queue_url, marks = sys.argv[1:5]
    visibility = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    engine = Engine(db)
    client = ThreadedClient(local_client(engine))
    guard = AsyncIdempotency(IdempotencyConfig(table_name="events-idem"), client=client)

    async def handler(message: dict[str, str]) -> str:
        with open(marks, "a") as out:
            out.write(f"start {message['Body']}\n")
        if message["Body"].startswith("hang"):
            await asyncio.Event().wait()
        await asyncio.sleep(2)
        with open(marks, "a") as out:
            out.write(f"done {message['Body']}\n")
        return message["Body"]

    session = get_session()
    async with session.create_client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ) as sqs:
        await AsyncSQSPoller(sqs, queue_url, guard, handler, visibility=visibility, wait=1).run()
    with open(marks, "a") as out:
        out.write("stopped\n")


if __name__ == "__main__":
    asyncio.run(main())
