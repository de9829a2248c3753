"""Client-side fault injection through botocore's own events (no mocks of our code).

``throttle(client, "PutItem", n)`` answers the next ``n`` PutItem calls with a throttling error
before they reach DynamoDB; ``drop_response(client, "PutItem")`` lets the next call reach
DynamoDB and apply, then loses its response (a ``ConnectionClosedError``), as a network would;
``cancel_transaction(client, reasons)`` cancels the next TransactWriteItems with given reasons.
"""

from __future__ import annotations

import itertools
from typing import Any

from botocore.exceptions import ConnectionClosedError

_ids = itertools.count()


class _Http:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}
        self.content = b""


def throttle(
    client: Any, operation: str, times: int, code: str = "ThrottlingException", status: int = 400
) -> list[int]:
    """Fail the next ``times`` calls of ``operation``; returns a list that counts the hits."""
    hits: list[int] = []

    def handler(**_: Any) -> Any:
        if len(hits) >= times:
            return None
        hits.append(1)
        parsed = {
            "Error": {"Code": code, "Message": "Rate of requests exceeds the allowed throughput."},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        return _Http(status), parsed

    client.meta.events.register(
        f"before-call.dynamodb.{operation}", handler, unique_id=f"throttle-{next(_ids)}"
    )
    return hits


def drop_response(client: Any, operation: str, times: int = 1) -> list[int]:
    """The next ``times`` calls of ``operation`` are applied, then their responses are lost."""
    hits: list[int] = []

    def handler(http_response: Any = None, **_: Any) -> None:
        if len(hits) >= times or http_response is None or http_response.status_code >= 300:
            return
        hits.append(1)
        raise ConnectionClosedError(endpoint_url="https://dynamodb.test")

    client.meta.events.register(
        f"after-call.dynamodb.{operation}", handler, unique_id=f"drop-{next(_ids)}"
    )
    return hits


def cancel_transaction(
    client: Any, reasons: list[dict[str, Any]], times: int = 1, *, conflict: bool = False
) -> list[int]:
    """Answer the next ``times`` TransactWriteItems with DynamoDB's cancellation (nothing is
    applied): ``TransactionCanceledException`` with ``reasons``, one per item, as DynamoDB
    sends them. ``conflict=True`` answers the top-level ``TransactionConflictException``
    instead. For reasons the engine cannot be made to give on a chosen item (a conflict or
    throttling on one item)."""
    hits: list[int] = []

    def handler(**_: Any) -> Any:
        if len(hits) >= times:
            return None
        hits.append(1)
        if conflict:
            body: dict[str, Any] = {
                "Error": {
                    "Code": "TransactionConflictException",
                    "Message": "Transaction is ongoing for the item",
                },
            }
        else:
            codes = ", ".join(str(r.get("Code")) for r in reasons)
            body = {
                "Error": {
                    "Code": "TransactionCanceledException",
                    "Message": "Transaction cancelled, please refer cancellation reasons for "
                    f"specific reasons [{codes}]",
                },
                "CancellationReasons": reasons,
            }
        body["ResponseMetadata"] = {"HTTPStatusCode": 400}
        return _Http(400), body

    client.meta.events.register(
        "before-call.dynamodb.TransactWriteItems", handler, unique_id=f"cancel-{next(_ids)}"
    )
    return hits


def without_returned_items(client: Any) -> None:
    """Make ``client`` talk like an endpoint without ``ReturnValuesOnConditionCheckFailure``:
    the parameter is taken out of every request (transaction items included), so a failed
    condition comes back without the stored item."""

    def strip(params: dict[str, Any], **_: Any) -> None:
        params.pop("ReturnValuesOnConditionCheckFailure", None)
        for action in params.get("TransactItems", ()):
            for body in action.values():
                body.pop("ReturnValuesOnConditionCheckFailure", None)

    client.meta.events.register(
        "provide-client-params.dynamodb", strip, unique_id=f"no-all-old-{next(_ids)}"
    )
