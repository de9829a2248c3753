"""A RabbitMQ consumer (pika, extra ``firstwrite[rabbitmq]``) on the broker-agnostic core.

:class:`RabbitMQConsumer` consumes a queue with manual acknowledgements: each delivery's key is
claimed before the handler runs (by default the message's ``message_id`` property; or a JMESPath
expression over a JSON body, or a function of the :class:`Delivery`), the claim's lease is
renewed while the handler runs, and the delivery is acked only when it is done (ran now, ran
before, or given up for good after ``max_attempts``). Anything else (failed, running in another
consumer, no key) is nacked with ``requeue=True`` after ``retry_delay``, so RabbitMQ delivers it
again, to this consumer or another. It is what the SQS consumers do, and proof that the core
fits any broker: the broker-specific part is how to read a key and how to ack. A broker that
restarts or drops the connection does not stop :meth:`RabbitMQConsumer.run`: it reconnects;
an ack or nack that fails is logged with the message's id (the broker delivers the message
again, and its record settles it without running the handler twice).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import pika
import pika.exceptions

from firstwrite.idempotency import Metrics
from firstwrite.idempotency.recovery import AnyHook

from .broker_errors import Backoff, settle_failed
from .core import Consumer, Keepalive, RecordResult
from .guard import EventGuard
from .selectors import json_body, key_function, payload_function

__all__ = ["Delivery", "Properties", "RabbitMQConsumer"]

LOG = logging.getLogger("firstwrite.events")


class Properties(Protocol):
    """What the consumer reads of pika's ``BasicProperties``."""

    message_id: str | None


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message as the handler gets it."""

    body: bytes
    properties: Properties
    delivery_tag: int
    redelivered: bool
    routing_key: str


def _message_id(delivery: Delivery) -> str:
    message_id = delivery.properties.message_id
    if not message_id:
        raise ValueError("the message has no message_id property; give key=")
    return message_id


def _body_json(delivery: Delivery) -> object:
    return json_body(delivery.body)


def _body(delivery: Delivery) -> object:
    return delivery.body


class RabbitMQConsumer:
    """Consumes ``queue`` on the broker at ``parameters`` with ``handler(delivery)``.

    ``lease``: the claim's lease, renewed every ``lease / 3`` while the handler runs.
    ``prefetch``: unacknowledged deliveries the broker sends ahead. ``reconcile`` decides for a
    delivery whose earlier run marked recovery points and died (docs/recovery.md). The other
    options are :class:`.Consumer`'s. :meth:`run` blocks until :meth:`stop` (from any thread).
    """

    def __init__(
        self,
        parameters: pika.ConnectionParameters,
        queue: str,
        guard: EventGuard,
        handler: Callable[[Delivery], object],
        *,
        key: str | Callable[[Delivery], str] | None = None,
        payload: Callable[[Delivery], object] | bool = True,
        validate: Callable[[Delivery], object] | None = None,
        max_attempts: int = 3,
        non_retryable: tuple[type[BaseException], ...] = (),
        scope: str | None = None,
        metrics: Metrics | None = None,
        lease: float = 30.0,
        prefetch: int = 1,
        retry_delay: float = 0.2,
        source: str = "rabbitmq",
        reconcile: AnyHook | None = None,
    ) -> None:
        self.parameters, self.queue, self.handler = parameters, queue, handler
        self.lease, self.prefetch, self.retry_delay = lease, prefetch, retry_delay
        self.consumer: Consumer[Delivery] = Consumer(
            guard,
            key_function(key, _message_id, _body_json),
            source=source,
            id=lambda d: str(d.delivery_tag),
            payload=payload_function(payload, _body),
            validate=validate,
            max_attempts=max_attempts,
            non_retryable=non_retryable,
            scope=scope,
            metrics=metrics,
            reconcile=reconcile,
        )
        self.results: list[RecordResult] = []  # the last few outcomes, for tools and tests
        self._stop = threading.Event()

    def stop(self) -> None:
        """Finish the delivery in hand, close the connection, return from :meth:`run`."""
        self._stop.set()

    def handle(self, delivery: Delivery) -> RecordResult:
        """One delivery through the core (claim, keepalive, complete or fail)."""
        keepalive = Keepalive(every=self.lease / 3, lease=self.lease)
        return self.consumer.process(delivery, self.handler, lease=self.lease, keepalive=keepalive)

    def run(self) -> None:
        """Consume until :meth:`stop`. A connection that cannot be made or is lost (a broker
        restarting, a dropped socket, a closed channel) is logged and made again after a
        growing delay (:class:`~.broker_errors.Backoff`); the deliveries unacked on it are the
        broker's to deliver again, and their records settle them then."""
        backoff = Backoff()
        while not self._stop.is_set():
            try:
                self._consume(backoff)
            except (pika.exceptions.AMQPError, OSError) as exc:
                delay = backoff.failed()
                LOG.error(
                    "consuming %s: the connection failed or was lost; reconnecting in %.2fs",
                    self.queue,
                    delay,
                    exc_info=exc,
                )
                self._stop.wait(delay)

    def _consume(self, backoff: Backoff) -> None:
        connection = pika.BlockingConnection(self.parameters)
        try:
            channel = connection.channel()
            channel.basic_qos(prefetch_count=self.prefetch)
            channel.basic_consume(self.queue, self._on_message, auto_ack=False)
            backoff.succeeded()
            while not self._stop.is_set():
                connection.process_data_events(time_limit=0.1)
                if not channel.is_open:
                    raise pika.exceptions.ChannelWrongStateError("the channel was closed")
        finally:
            if connection.is_open:
                with contextlib.suppress(pika.exceptions.AMQPError, OSError):
                    connection.close()

    def _on_message(
        self,
        channel: pika.adapters.blocking_connection.BlockingChannel,
        method: pika.spec.Basic.Deliver,
        properties: pika.BasicProperties,
        body: bytes,
    ) -> None:
        delivery = Delivery(
            body, properties, method.delivery_tag, bool(method.redelivered), method.routing_key
        )
        result = self.handle(delivery)
        self.results = [*self.results[-99:], result]
        action = "basic_ack" if result.acknowledged else "basic_nack"
        try:
            if result.acknowledged:
                channel.basic_ack(method.delivery_tag)
            else:
                time.sleep(self.retry_delay)
                channel.basic_nack(method.delivery_tag, requeue=True)
        except (pika.exceptions.AMQPError, OSError) as exc:  # the channel or connection is gone
            message_id = properties.message_id or f"(delivery tag {method.delivery_tag})"
            settle_failed(message_id, action, exc)
