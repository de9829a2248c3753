"""Testing code that uses DynamoDB against firstwrite's local engine.

Moto's convenience, DynamoDB's semantics:

- :func:`mock_dynamodb`: every boto3 / aiobotocore DynamoDB (and DynamoDB Streams) client the
  code under test creates is answered by an in-process engine, with nothing to configure.
- The pytest plugin (:mod:`firstwrite.testing.plugin`, loaded automatically when firstwrite is
  installed): ``firstwrite_engine``, ``firstwrite_client``, ``firstwrite_guard``,
  ``firstwrite_mock`` and more. See ``docs/testing.md``.

Importing this package does not import the engine (an extra: ``firstwrite[engine]``), nor
botocore.
"""

from __future__ import annotations

from ._extra import MissingExtraError
from .redirect import Redirect, install, mock_dynamodb

__all__ = ["MissingExtraError", "Redirect", "install", "mock_dynamodb"]
