"""What the Lambda sources share: :class:`LambdaSource`, the invocation's deadline.

Each source module (``sqs``, ``kinesis``, ``dynamodb_streams``, ``sns``, ``eventbridge``) says
how to read its records; :class:`LambdaSource` turns that and your options into a
:class:`~.core.Consumer`. A public module: subclass :class:`LambdaSource` (its ``own_id``,
``body``, ``content``...) for an event source of your own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from firstwrite.idempotency import Metrics
from firstwrite.idempotency.recovery import AnyHook

from .core import BatchResult, Consumer, Ordering, RecordResult
from .guard import EventGuard
from .selectors import key_function, payload_function
from .shapes import LambdaContext, PartialBatchResponse

__all__ = ["LambdaSource", "NotAcknowledgedError", "Options", "deadline", "response", "single"]

R = TypeVar("R")


class NotAcknowledgedError(Exception):
    """A single event (SNS, EventBridge) that must be delivered again: raised from the
    handler so that Lambda retries the asynchronous invocation. ``.result`` says why."""

    def __init__(self, result: RecordResult) -> None:
        super().__init__(f"record {result.id}: {result.outcome.value} ({result.reason})")
        self.result = result


@dataclass(frozen=True)
class Options(Generic[R]):
    """A source's options, as every source takes them (see :class:`.Consumer`)."""

    key: str | Callable[[R], str] | None = None
    payload: Callable[[R], object] | bool = True
    validate: Callable[[R], object] | None = None
    max_attempts: int = 3
    non_retryable: tuple[type[BaseException], ...] = ()
    scope: str | None = None
    metrics: Metrics | None = None
    lease_margin: float = 1.0
    reconcile: AnyHook | None = None


class LambdaSource(Generic[R]):
    """A Lambda event source: build it once (at cold start), then call it per invocation.

    ``key``: ``None`` (the source's own id), a JMESPath expression over the record's decoded
    body, or a function of the record. ``payload``: what is fingerprinted (default: the
    record's content; ``False``: no check; or a function of the record). ``lease_margin`` is
    taken off the invocation's remaining time to cap each claim's lease. ``reconcile``
    decides for a record whose earlier run marked recovery points and died (docs/recovery.md;
    default: the guard's hook). The other options are :class:`.Consumer`'s.
    """

    source: ClassVar[str] = "custom"
    ordering: ClassVar[Ordering] = Ordering.INDEPENDENT

    def __init__(
        self,
        guard: EventGuard,
        *,
        key: str | Callable[[R], str] | None = None,
        payload: Callable[[R], object] | bool = True,
        validate: Callable[[R], object] | None = None,
        max_attempts: int = 3,
        non_retryable: tuple[type[BaseException], ...] = (),
        scope: str | None = None,
        metrics: Metrics | None = None,
        lease_margin: float = 1.0,
        reconcile: AnyHook | None = None,
    ) -> None:
        self.guard = guard
        self.options: Options[R] = Options(
            key,
            payload,
            validate,
            max_attempts,
            non_retryable,
            scope,
            metrics,
            lease_margin,
            reconcile,
        )
        self.consumer = self.make_consumer(self.source, self.ordering)

    def make_consumer(self, source: str, ordering: Ordering) -> Consumer[R]:
        """A :class:`~.core.Consumer` of this source's records under ``ordering``."""
        options = self.options
        return Consumer(
            self.guard,
            key_function(options.key, self.own_id, self.body),
            source=source,
            id=self.item_id,
            payload=payload_function(options.payload, self.content),
            group=self.group if ordering is Ordering.GROUPS else None,
            ordering=ordering,
            validate=options.validate,
            max_attempts=options.max_attempts,
            non_retryable=options.non_retryable,
            scope=options.scope,
            metrics=options.metrics,
            redelivered=self.redelivery(),
            reconcile=options.reconcile,
        )

    # -- what each source says about its records ---------------------------------------------

    def redelivery(self) -> Callable[[R], bool] | None:
        """How to tell a record delivered again (its replay is read before any claim), or
        ``None``: this source does not say."""
        return None

    def own_id(self, record: R) -> str:
        """The default key."""
        raise NotImplementedError

    def item_id(self, record: R) -> str:
        """What the broker calls the record (a partial batch response's ``itemIdentifier``)."""
        return self.own_id(record)

    def body(self, record: R) -> object:
        """What a key expression selects from."""
        raise NotImplementedError

    def content(self, record: R) -> object:
        """What is fingerprinted by default."""
        raise NotImplementedError

    def group(self, record: R) -> str | None:
        """The ordering group (FIFO)."""
        return None

    # -- an invocation -----------------------------------------------------------------------

    def consumer_for(self, records: Sequence[R]) -> Consumer[R]:
        """The consumer for this batch."""
        return self.consumer

    def process(
        self, records: Sequence[R], context: LambdaContext | None, handler: Callable[[R], object]
    ) -> BatchResult:
        """Every record's outcome."""
        return self.consumer_for(records).consume(
            records, handler, remaining=deadline(context, self.options.lease_margin)
        )


def response(batch: BatchResult) -> PartialBatchResponse:
    """The partial batch response (``batchItemFailures``) for ``batch``."""
    return {"batchItemFailures": [{"itemIdentifier": i} for i in batch.item_failures]}


def deadline(context: LambdaContext | None, margin: float) -> Callable[[], float] | None:
    """Seconds left in the invocation, less ``margin`` (``None`` without a context)."""
    if context is None:
        return None

    def remaining() -> float:
        return context.get_remaining_time_in_millis() / 1000.0 - margin

    return remaining


def single(batch: BatchResult) -> None:
    """Raise :class:`NotAcknowledgedError` for the first record of ``batch`` not acknowledged."""
    for result in batch.results:
        if not result.acknowledged:
            raise NotAcknowledgedError(result)
