"""The engine's features, each riding on the core's hooks, never patching an operation.

No feature imports another (they meet through the hooks, ``context.py``).

* ``tags`` — CreateTable's ``Tags``;
* ``streams`` — the change hook that writes stream records, and streams on and off;
* ``ttl`` — the expiry index and the background sweeper;
* ``regions`` — global tables: replicas and their replication;
* ``indexes`` — secondary indexes kept in every write, built and dropped in the background;
* ``faults`` — fault injection and provisioned-throughput enforcement.

:class:`~firstwrite.engine.api.Engine` lists them; each is a
:class:`~firstwrite.engine.context.Feature`.
"""
