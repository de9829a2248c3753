"""What a consumer does when its broker refuses or drops a call: log it with the message's id.

A call that settles one message (delete it, change its visibility, ack or nack it) can fail
with one of the broker's ordinary answers: SQS says ``ReceiptHandleIsInvalid`` to a receipt
handle of a message another consumer has deleted meanwhile and ``MessageNotInflight`` to a
visibility change of a message no longer in flight; any call can meet a dropped connection, a
closed channel or a broker restarting. None of these loses or repeats work: the message's
record in the table says whether it ran, so a message that was not deleted (or acked) comes
back and its record settles it then, without running its handler again. :func:`settle_failed`
logs such a failure, with the message's id, on logger ``firstwrite.events`` and the consumer
goes on with its next message; :class:`Backoff` spaces the retries of a receive or a
reconnection that failed.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

__all__ = ["ORDINARY_CODES", "Backoff", "error_code", "settle_failed"]

LOG = logging.getLogger("firstwrite.events")

ORDINARY_CODES = frozenset(
    {"ReceiptHandleIsInvalid", "MessageNotInflight", "InvalidParameterValue"}
)
"""SQS's answers to a settle call on a message some other consumer has settled or received
since: logged at INFO (anything else at WARNING, with its traceback)."""


def error_code(exc: BaseException) -> str:
    """A botocore ``ClientError``'s code without SQS's ``AWS.SimpleQueueService.`` prefix (the
    query-compatible spelling), else the exception's class name."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if isinstance(code, str) and code:
            return code.rsplit(".", 1)[-1]
    return type(exc).__name__


def settle_failed(
    message_id: str, action: str, exc: BaseException, logger: logging.Logger = LOG
) -> None:
    """Log that ``action`` (``delete_message``, ``basic_ack``...) on message ``message_id``
    failed with ``exc``; the caller goes on with its next message."""
    code = error_code(exc)
    ordinary = code in ORDINARY_CODES
    logger.log(
        logging.INFO if ordinary else logging.WARNING,
        "%s of message %s failed (%s: %s); the message is delivered again unless another "
        "consumer settled it, and its record settles it then",
        action,
        message_id,
        code,
        exc,
        exc_info=None if ordinary else exc,
    )


@dataclass
class Backoff:
    """Delays between retries of a failing receive or connection: ``first`` seconds doubling
    up to ``cap``, each drawn at random between half the delay and the delay (so consumers that
    failed together do not retry together); :meth:`succeeded` starts over."""

    first: float = 0.1
    cap: float = 5.0
    failures: int = 0

    def failed(self) -> float:
        """The delay before the next retry."""
        delay = min(self.cap, self.first * 2 ** min(self.failures, 30))
        self.failures += 1
        return random.uniform(delay / 2, delay)

    def succeeded(self) -> None:
        self.failures = 0
