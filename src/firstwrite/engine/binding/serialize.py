"""The quick path's request serialisation: botocore's JSON request, without botocore's walk.

For parameters made only of what botocore's ``JSONSerializer`` writes as they are (``str``,
``int``, ``bool``, ``dict``, ``list``, ``tuple``: no blob, float or timestamp, no renamed
member), its copy is the parameters themselves, so the body is ``json.dumps(parameters)``.
:mod:`.validate` compiles that condition (``compile_check(shape, as_is=True)``) and
:class:`JsonRequests` builds the request dict botocore's serializer would build around that
body. Anything else is serialised by botocore as before.

Such parameters are also their body's JSON value, so :func:`parameters_of` gives the quick path
the parameters of the very body built from them (per thread, or per task on aiobotocore), unless
a hook replaced the body or it holds a ``\\ud`` escape, and the engine reads them in place of
decoding the body again. The engine never changes those dicts; it trusts that nobody else does
during the call. Nesting too deep for the decoder raises ``RecursionError`` in the as-is check
first, as in botocore's own validator.

``tests/engine/binding/test_binding_serialize.py`` checks, for every operation's input shape and
random parameters, that the request is exactly the one botocore's serializer builds. The
reasoning in full: docs/engine.md, "The quick path's compiled steps".
"""

from __future__ import annotations

import contextvars
import json
from typing import Any

from botocore.model import OperationModel
from botocore.serialize import JSONSerializer

__all__ = ["JsonRequests", "parameters_of"]

# Bodies up to this size are remembered with their parameters: the saving is on small calls, and
# a request built but never answered by the quick path (another before-call hook answered it)
# stays remembered until the next one, so what it can hold is kept small.
REMEMBERED_BODY_BYTES = 64 * 1024

# (body, operation model, parameters) of the last as-is request built in this context.
_BUILT: contextvars.ContextVar[tuple[bytes, OperationModel, dict[str, Any]] | None] = (
    contextvars.ContextVar("firstwrite_binding_built", default=None)
)


def parameters_of(body: Any, model: OperationModel) -> dict[str, Any] | None:
    """The parameters ``body`` was built from as it is, if it is the last request built as it
    is in this context, for ``model``, and its JSON carries no surrogate escape; else ``None``.
    Forgets the remembered request either way."""
    built = _BUILT.get()
    if built is None:
        return None
    _BUILT.set(None)
    sent, built_for, parameters = built
    if sent is not body or built_for is not model or b"\\ud" in sent:
        return None
    return parameters


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
        value = parameters if model.input_shape is not None else {}
        body = json.dumps(value).encode(JSONSerializer.DEFAULT_ENCODING)
        if len(body) <= REMEMBERED_BODY_BYTES and type(value) is dict:
            _BUILT.set((body, model, value))
        return {
            "url_path": "/",
            "query_string": "",
            "method": method,
            "headers": {"X-Amz-Target": target, "Content-Type": content_type},
            "body": body,
        }
