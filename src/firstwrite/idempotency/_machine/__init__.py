"""The layer's internals: the state machine and the parts it is made of. Not public API.

Only the guards' modules (``guard``, ``aio``) and ``local`` import from here
(``tests/test_architecture.py`` enforces it); names here may change between releases without
notice. The vocabulary the machine shares with the public modules lives beside them, one level
up: :mod:`..effects` (the DynamoDB calls a transition yields), :mod:`..verdicts`,
:mod:`..client_errors`, :mod:`..serialization` and :mod:`..typed_json`. Loading this package
imports nothing.

Two levels of effects: a transition here yields DynamoDB calls (:class:`..effects.Call`) that
:mod:`.driving` performs on a client; one guard call (``claim``, ``complete``...) runs one
transition. Code built *on* a guard (the HTTP middleware, the event consumers) yields guard
calls instead, the steps of :mod:`..steps`, which its drivers perform on a guard.

* :mod:`.machine`: the idempotency state machine, :class:`~.machine.StateMachine`, every
  decision of ``claim``/``complete``/``fail``/``renew``/``get`` as a generator of effects, no I/O.
* :mod:`.transactional`: the same for ``claim_with``/``complete_with`` (TransactWriteItems).
* :mod:`.completion`: ``complete`` with its retries for up to one lease.
* :mod:`.table_setup`: ``ensure_table`` as a transition.
* :mod:`.cancellation`: a cancelled transaction's reasons, read.
* :mod:`.driving`: performing effects on a blocking or an asyncio client (the guards' base).
* :mod:`.retry`: the one retry loop (backoff, which errors are retried).
* :mod:`.budget`: a call's deadline, and the client timeouts it must fit.
* :mod:`.reporting`: every log record and metric of a transition.
* :mod:`.cache`: the optional in-process replay cache.
"""
