"""A poller in its own process (for the SIGKILL test): argv = engine db, SQS url, queue url,
marks file, visibility. Its handler writes ``start <body>`` then, for bodies starting with
``hang``, blocks forever; others write ``done <body>``."""

from __future__ import annotations

import sys
import time

import boto3

from firstwrite.engine import Engine, local_client
from firstwrite.events.sqs_poller import SQSPoller
from firstwrite.idempotency import Idempotency, IdempotencyConfig


def main() -> None:
    db, endpoint, queue_url, marks, visibility = sys.argv[1:6]
    engine = Engine(db)
    guard = Idempotency(IdempotencyConfig(table_name="events-idem"), client=local_client(engine))
    sqs = boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )

    def handler(message: dict[str, str]) -> str:
        with open(marks, "a") as out:
            out.write(f"start {message['Body']}\n")
        if message["Body"].startswith("hang"):
            time.sleep(3600)
        with open(marks, "a") as out:
            out.write(f"done {message['Body']}\n")
        return message["Body"]

    SQSPoller(sqs, queue_url, guard, handler, visibility=int(visibility), wait=1).run()


if __name__ == "__main__":
    main()
