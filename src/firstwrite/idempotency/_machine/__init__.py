"""The layer's internals: the state machine and the parts it is made of. Not public API.

The public modules beside it (``guard``, ``aio``, ``decorators``, ...) are built on it; names
here may change between releases without notice. Loading it imports nothing.

* :mod:`.machine`: the idempotency state machine, :class:`~.machine.StateMachine`, every
  decision of ``claim``/``complete``/``fail``/``renew``/``get`` as a generator of effects, no I/O.
* :mod:`.transactional`: the same for ``claim_with``/``complete_with`` (TransactWriteItems).
* :mod:`.table_setup`: ``ensure_table`` as a transition.
* :mod:`.verdicts`: what a failed claim's stored record means (one ordered table of rules).
* :mod:`.cancellation`: a cancelled transaction's reasons, read.
* :mod:`.effects`: the effects a transition yields (:class:`~.effects.Call`,
  :class:`~.effects.Sleep`) and the client's methods bound once.
* :mod:`.driving`: performing effects on a blocking or an asyncio client (the guards' base).
* :mod:`.retry`: the one retry loop (backoff, which errors are retried).
* :mod:`.client_errors`: a client's errors recognised by their shape (no botocore import).
* :mod:`.reporting`: every log record and metric of a transition.
* :mod:`.serialization`, :mod:`.typed_json`: results and errors to and from the record.
* :mod:`.cache`: the optional in-process replay cache.
"""
