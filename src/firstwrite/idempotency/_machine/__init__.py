"""The layer's internals: the state machine and the parts it is made of. Not public API.

Only the guards' modules (``guard``, ``aio``) and ``local`` import from here
(``tests/test_architecture.py`` enforces it); names here may change without notice. What the
machine shares with the public modules lives one level up (:mod:`firstwrite.idempotency.effects`,
``verdicts``, ``client_errors``, ``serialization``, ``typed_json``). Loading this imports nothing.

A transition here yields DynamoDB calls (:class:`firstwrite.idempotency.effects.Call`) that
:mod:`.driving` performs; one guard call runs one transition. Code built *on* a guard yields
guard calls instead (:mod:`firstwrite.idempotency.steps`).

* :mod:`.machine`: :class:`~.machine.StateMachine`, every decision of ``claim``/``complete``/
  ``fail``/``renew``/``get``; :mod:`.transactional`: ``claim_with``/``complete_with``.
* :mod:`.completion`: ``complete`` retried for up to one lease; :mod:`.table_setup`:
  ``ensure_table``; :mod:`.cancellation`: a cancelled transaction's reasons.
* :mod:`.driving`: effects on a blocking or asyncio client; :mod:`.retry`: the one retry loop;
  :mod:`.budget`: a call's deadline; :mod:`.reporting`: logs and metrics; :mod:`.cache`: the
  optional replay cache.
"""
