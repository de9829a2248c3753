"""The quick path's request serialisation: botocore's JSON request, without botocore's walk.

botocore's ``JSONSerializer`` copies a call's parameters into a new tree, member by member,
re-reading the model at every value, and then writes that tree as JSON. For parameters made
only of what it writes as it is (``str``, ``int``, ``bool``, ``dict``, ``list`` and ``tuple``:
no blob, float or timestamp, no renamed member), the copy is the parameters themselves, so its
JSON is ``json.dumps(parameters)``. :mod:`.binding_validate` compiles that condition beside its
validity check (``compile_check(shape, as_is=True)``), and :class:`JsonRequests` builds the
request dict botocore's serializer would build around that body. Anything else (a blob, a
float, an operation with a host prefix, a query-compatible service, a serializer that is not
botocore's own ``JSONSerializer``) is serialised by botocore as before.

``tests/engine/test_binding_serialize.py`` checks, for every operation's input shape and random
parameters, that the request is exactly the one botocore's serializer builds.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.model import OperationModel
from botocore.serialize import JSONSerializer

__all__ = ["JsonRequests"]


class JsonRequests:
    """The request dicts of one client's ``JSONSerializer`` for parameters it writes as they
    are; :meth:`for_serializer` says ``None`` for any other serializer."""

    def __init__(self) -> None:
        # operation name -> (its model, (X-Amz-Target, Content-Type, method) or None)
        self._plans: dict[str, tuple[OperationModel, tuple[str, str, str] | None]] = {}

    @staticmethod
    def for_serializer(serializer: Any) -> JsonRequests | None:
        return JsonRequests() if type(serializer) is JSONSerializer else None

    def _plan(self, model: OperationModel) -> tuple[str, str, str] | None:
        kept = self._plans.get(model.name)
        if kept is not None and kept[0] is model:
            return kept[1]
        metadata = model.metadata
        plan: tuple[str, str, str] | None = None
        eligible = (
            not model.service_model.is_query_compatible
            and (model.endpoint is None or "hostPrefix" not in model.endpoint)
            and "targetPrefix" in metadata
            and "jsonVersion" in metadata
        )
        if eligible:
            plan = (
                f"{metadata['targetPrefix']}.{model.name}",
                f"application/x-amz-json-{metadata['jsonVersion']}",
                model.http.get("method", JSONSerializer.DEFAULT_METHOD),
            )
        self._plans[model.name] = (model, plan)
        return plan

    def request(self, parameters: dict[str, Any], model: OperationModel) -> dict[str, Any] | None:
        """``JSONSerializer.serialize_to_request(parameters, model)`` for parameters its walk
        writes as they are (the caller has checked that), or ``None`` for an operation whose
        request it does not build."""
        plan = self._plan(model)
        if plan is None:
            return None
        target, content_type, method = plan
        body = parameters if model.input_shape is not None else {}
        return {
            "url_path": "/",
            "query_string": "",
            "method": method,
            "headers": {"X-Amz-Target": target, "Content-Type": content_type},
            "body": json.dumps(body).encode(JSONSerializer.DEFAULT_ENCODING),
        }
