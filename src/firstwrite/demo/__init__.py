"""The payments demo: a small API on the Idempotency-Key middleware, the project's main job.

``python -m firstwrite.demo`` (or ``firstwrite demo``) serves it on http://127.0.0.1:8080 over
the local engine (one database file, no AWS account), with the engine's DynamoDB endpoint on
http://127.0.0.1:8000 for the AWS CLI. ``--aws`` runs it on DynamoDB instead. See
:mod:`.app` for the API and :func:`serve` for the options.
"""

from __future__ import annotations

from .app import create_app
from .server import serve

__all__ = ["create_app", "serve"]
