"""What became of the records of a batch: :class:`RecordOutcome`, :class:`RecordResult`, :class:`BatchResult`.

:class:`Ordering` says what a record not done does to the records after it; ``LEVELS`` how
loudly each outcome is logged. :class:`~.core.Consumer` makes them; the sources read them.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["LEVELS", "BatchResult", "Ordering", "RecordOutcome", "RecordResult"]


class Ordering(enum.Enum):
    """What a record that is not done does to the records after it in the batch."""

    INDEPENDENT = "independent"  # nothing: each record on its own (SQS standard queues)
    GROUPS = "groups"  # the later records of its group are not tried (SQS FIFO)
    STREAM = "stream"  # no later record is tried (Kinesis, DynamoDB Streams)


class RecordOutcome(enum.Enum):
    """What became of one record."""

    PROCESSED = "processed"  # the handler ran now and its result is stored
    REPLAYED = "replayed"  # it ran before: not run again
    REPLAYED_FAILURE = "replayed_failure"  # it was given up before: not run again
    FAILED_FINAL = "failed_final"  # given up now (attempts spent, invalid): stored FAILED
    FAILED = "failed"  # the handler raised: to be delivered again
    IN_PROGRESS = "in_progress"  # another consumer holds its claim: to be delivered again
    MISMATCH = "mismatch"  # its key is another payload's: to be delivered again (to the DLQ)
    INVALID = "invalid"  # no key could be selected: to be delivered again (to the DLQ)
    LOST = "lost"  # ran, but its result was not recorded: to be delivered again
    SKIPPED = "skipped"  # not tried (an earlier failure of its group, or no time left)

    @property
    def acknowledged(self) -> bool:
        """The broker may forget the record: it ran, or it was given up for good."""
        return self in _ACKNOWLEDGED


_ACKNOWLEDGED = frozenset(
    {
        RecordOutcome.PROCESSED,
        RecordOutcome.REPLAYED,
        RecordOutcome.REPLAYED_FAILURE,
        RecordOutcome.FAILED_FINAL,
    }
)


class RecordResult(NamedTuple):
    """One record's outcome; ``result`` is the handler's return value when it ran now. (A named
    tuple: one is built per record, and it is the cheapest immutable value to build.)"""

    id: str
    key: str | None
    outcome: RecordOutcome
    result: object = None
    reason: str | None = None
    attempts: int = 0

    @property
    def acknowledged(self) -> bool:
        return self.outcome.acknowledged


@dataclass(frozen=True, slots=True)
class BatchResult:
    """Every record's outcome, in the batch's order."""

    results: Sequence[RecordResult]
    ordering: Ordering = Ordering.INDEPENDENT

    @property
    def redeliver(self) -> list[str]:
        """The ids of the records the broker must deliver again, in order."""
        return [r.id for r in self.results if not r.outcome.acknowledged]

    @property
    def item_failures(self) -> list[str]:
        """What a partial batch response reports: every record not acknowledged, or, on a
        stream, only the first one (Lambda resumes the shard from it)."""
        failed = self.redeliver
        return failed[:1] if self.ordering is Ordering.STREAM else failed

    def count(self, outcome: RecordOutcome) -> int:
        return sum(1 for r in self.results if r.outcome is outcome)


LEVELS = {
    RecordOutcome.PROCESSED: logging.DEBUG,
    RecordOutcome.REPLAYED: logging.INFO,
    RecordOutcome.REPLAYED_FAILURE: logging.INFO,
    RecordOutcome.FAILED_FINAL: logging.ERROR,
    RecordOutcome.FAILED: logging.WARNING,
    RecordOutcome.IN_PROGRESS: logging.INFO,
    RecordOutcome.MISMATCH: logging.ERROR,
    RecordOutcome.INVALID: logging.ERROR,
    RecordOutcome.LOST: logging.WARNING,
    RecordOutcome.SKIPPED: logging.DEBUG,
}
