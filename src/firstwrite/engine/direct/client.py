"""The direct in-process client: boto3's low-level API over :meth:`Engine.execute`, no JSON.

``DirectClient(engine).put_item(TableName=..., Item=...)`` takes the same keyword arguments and
returns the same response shapes as ``boto3.client("dynamodb")``: ``B`` values are ``bytes`` both
ways, timestamps are timezone-aware ``datetime`` objects, every response carries
``ResponseMetadata`` with a ``RequestId`` and, in ``HTTPHeaders``, the engine clock's ``date``
(as DynamoDB dates its answers: what the idempotency layer reads DynamoDB's time from). Errors
are the very ``ClientError`` subclasses boto3 raises for the same wire body, with the same
``e.response`` dict.

This is the fast path: a call is one dict build, one :meth:`Engine.execute` and one dict build,
with no serialisation, signing, event hooks or HTTP machinery in between. Every shape-driven step
(timestamp conversion, idempotency tokens) is compiled once per operation and skipped entirely
for operations that do not need it.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import botocore.exceptions
import botocore.loaders
import botocore.utils
from botocore import xform_name
from botocore.exceptions import ClientError, ParamValidationError
from botocore.model import OperationNotFoundError, ServiceModel, Shape
from botocore.paginate import Paginator, PaginatorModel
from botocore.serialize import JSONSerializer
from botocore.validate import ParamValidator
from botocore.waiter import NormalizedOperationMethod, Waiter, WaiterModel

from ..api import operation_table
from ..client_exceptions import exceptions_factory
from ..errors import DynamoDBError
from ..wire import CONTENT_TYPE, new_request_id
from .errors import ErrorMaker
from .surrogates import UNREADABLE, holds_surrogate

if TYPE_CHECKING:
    from ..api import Engine, Service

__all__ = [
    "SERVICE_NAMES",
    "DirectClient",
    "client_error",
    "service_model",
]

log = logging.getLogger(__name__)

ServiceName = Literal["dynamodb", "dynamodbstreams"]
SERVICE_NAMES: dict[str, Service] = {"dynamodb": "dynamodb", "dynamodbstreams": "streams"}

Transform = Callable[[Any], Any]
# (member name in e.response, key in the wire body, conversion) for each modeled error member
_ErrorMembers = tuple[tuple[str, str, Transform | None], ...]
# (exception class, HTTP status, (member, conversion) the body's message fills, all members)
_ErrorPlan = tuple[type[ClientError], int, tuple[str, Transform | None] | None, _ErrorMembers]


@functools.cache
def _loader() -> botocore.loaders.Loader:
    return botocore.loaders.create_loader()


@functools.cache
def service_model(service_name: str) -> ServiceModel:
    """botocore's model of ``dynamodb`` or ``dynamodbstreams`` (loaded once per process)."""
    data = _loader().load_service_model(service_name, "service-2")
    return ServiceModel(data, service_name=service_name)


def client_error(
    error: DynamoDBError,
    operation_name: str,
    *,
    service_name: ServiceName = "dynamodb",
    request_id: str | None = None,
) -> ClientError:
    """The exception boto3 raises when DynamoDB answers ``error.wire_body()``.

    Mirrors botocore's JSON error parsing: ``Error.Code``/``Error.Message`` from the body,
    then the members of the modeled error shape (``Item``, ``CancellationReasons``,
    ``message``...) merged at the top level of ``e.response``.
    """
    return _codec(service_name).client_error(error, operation_name, request_id or new_request_id())


class _Codec:
    """Per-service, per-operation compiled helpers (shared by every client of the service)."""

    def __init__(self, service_name: ServiceName) -> None:
        self.service_name = service_name
        self.model = service_model(service_name)
        self.exceptions = exceptions_factory().create_client_exceptions(self.model)
        self._serializer = JSONSerializer()
        self._error_plans: dict[str, _ErrorPlan] = {}
        self._make_error = ErrorMaker()
        self._calls: dict[str, _OperationPlan] = {}

    # -- errors -------------------------------------------------------------------------------

    def client_error(
        self, error: DynamoDBError, operation_name: str, request_id: str, date: str | None = None
    ) -> ClientError:
        code = error.code
        plan = self._error_plans.get(code)
        if plan is None:
            plan = self._error_plans[code] = self._error_plan(code)
        cls, status, message_member, members = plan
        extra = error.extra
        if extra:
            body = error.wire_body()
            message = body.get("message", body.get("Message", ""))
        else:
            # The body is only __type and the message (absent when empty for
            # UnknownOperationException, and then read as ""): no body to build.
            message = error.message
        response: dict[str, Any] = {
            "Error": {"Message": message, "Code": code},
            "ResponseMetadata": {
                "RequestId": request_id,
                "HTTPStatusCode": status,
                "HTTPHeaders": {"x-amzn-requestid": request_id, "content-type": CONTENT_TYPE},
                "RetryAttempts": 0,
            },
        }
        if date is not None:
            response["ResponseMetadata"]["HTTPHeaders"]["date"] = date
        if extra:
            for name, wire_name, transform in members:
                value = body.get(wire_name)
                if value is not None:
                    response[name] = value if transform is None else transform(value)
        elif message_member is not None and (message or code != "UnknownOperationException"):
            name, transform = message_member
            response[name] = message if transform is None else transform(message)
        return self._make_error(cls, response, operation_name, code, message)

    def _error_plan(self, code: str) -> _ErrorPlan:
        """The exception class, HTTP status and modeled members of an error code, and the
        member its body's message fills (the one member a body without extras fills)."""
        members = self._compile_error(code)
        message_key = next(iter(DynamoDBError(code, "?").wire_body().keys() - {"__type"}))
        message_member = next(
            ((name, transform) for name, wire, transform in members if wire == message_key), None
        )
        status = DynamoDBError(code).status
        return self.exceptions.from_code(code), status, message_member, members

    def _compile_error(self, code: str) -> _ErrorMembers:
        shape = self.model.shape_for_error_code(code)
        if shape is None:
            return ()
        return tuple(
            (name, member.serialization.get("name", name), self._output_transform(member))
            for name, member in shape.members.items()
        )

    # -- shape-driven conversions --------------------------------------------------------------

    def plan(self, operation_name: str) -> _OperationPlan:
        plan = self._calls.get(operation_name)
        if plan is None:
            plan = self._calls[operation_name] = _OperationPlan(self, operation_name)
        return plan

    def _output_transform(self, shape: Shape | None) -> Transform | None:
        return _compile(shape, _parse_timestamp, {})

    def _input_transform(self, shape: Shape | None) -> Transform | None:
        return _compile(shape, self._serialize_timestamp, {})

    def _serialize_timestamp(self, value: Any) -> Any:
        return self._serializer._convert_timestamp_to_str(value, "unixtimestamp")


def _parse_timestamp(value: Any) -> Any:
    return botocore.utils.parse_timestamp(value)


def _compile(
    shape: Shape | None, leaf: Transform, memo: dict[str, Transform | None]
) -> Transform | None:
    """A function converting every timestamp inside ``shape``; ``None`` when there are none.

    Only timestamps differ between the engine's dict shapes and boto3's: blobs are bytes on
    both sides and numbers are strings. Returning ``None`` for timestamp-free shapes is what
    keeps item operations free of any per-call walk.
    """
    if shape is None:
        return None
    kind = shape.type_name
    if kind == "timestamp":
        return leaf
    if kind not in ("structure", "list", "map"):
        return None
    if shape.name in memo:  # recursive shape (AttributeValue): no timestamps on the cycle
        return memo[shape.name]
    memo[shape.name] = None
    result: Transform | None = None
    if kind == "structure":
        fields = [
            (name, fn)
            for name, member in shape.members.items()
            if (fn := _compile(member, leaf, memo)) is not None
        ]
        if fields:

            def structure(value: Any) -> Any:
                if not isinstance(value, dict):
                    return value
                out = dict(value)
                for name, fn in fields:
                    if name in out and out[name] is not None:
                        out[name] = fn(out[name])
                return out

            result = structure
    elif kind == "list":
        item = _compile(shape.member, leaf, memo)
        if item is not None:

            def listing(value: Any) -> Any:
                return [item(v) for v in value] if isinstance(value, list) else value

            result = listing
    else:
        val = _compile(shape.value, leaf, memo)
        if val is not None:

            def mapping(value: Any) -> Any:
                if not isinstance(value, dict):
                    return value
                return {k: val(v) for k, v in value.items()}

            result = mapping
    memo[shape.name] = result
    return result


class _OperationPlan:
    """What one operation needs beyond ``Engine.execute``: compiled once, reused forever."""

    __slots__ = ("idempotent", "input", "modeled", "name", "operation_model", "output")

    def __init__(self, codec: _Codec, name: str) -> None:
        self.name = name
        try:
            op = codec.model.operation_model(name)
        except OperationNotFoundError:
            # Implemented by the engine but unknown to this botocore: pass through untouched.
            self.operation_model = None
            self.modeled = False
            self.idempotent: tuple[str, ...] = ()
            self.input: Transform | None = None
            self.output: Transform | None = None
            return
        self.operation_model = op
        self.modeled = True
        self.idempotent = tuple(op.idempotent_members)
        self.input = codec._input_transform(op.input_shape)
        self.output = codec._output_transform(op.output_shape)


@functools.cache
def _codec(service_name: ServiceName) -> _Codec:
    return _Codec(service_name)


class _Meta:
    """The subset of ``client.meta`` that callers of a boto3 client reach for."""

    def __init__(self, region_name: str, service_model: ServiceModel) -> None:
        self.region_name = region_name
        self.service_model = service_model
        self.endpoint_url: str | None = None
        self.partition = "aws"

    @property
    def method_to_api_mapping(self) -> dict[str, str]:
        return dict(self.service_model._api_mapping_cache())


class DirectClient:
    """boto3's low-level DynamoDB (or DynamoDB Streams) client, answered in-process.

    Method names are generated from the engine's operation table plus botocore's model with
    botocore's ``xform_name`` (``PutItem`` -> ``put_item``), so operations registered later
    appear automatically; modeled operations the engine lacks raise the same
    ``UnknownOperationException`` a server would.

    This is the fast path, so by default it skips botocore's client-side parameter validation
    (which costs as much as the engine's own work on a small PutItem): a request with missing
    members or wrong Python types is still rejected, by the engine, as the
    ``ValidationException``/``SerializationException`` a server would send. ``validate=True``
    runs botocore's validator first and raises ``ParamValidationError`` exactly as boto3 does;
    for boto3's whole client stack use :func:`firstwrite.engine.binding.sync.local_client`.
    """

    def __init__(
        self,
        engine: Engine,
        region: str | None = None,
        *,
        service: ServiceName = "dynamodb",
        validate: bool = False,
    ) -> None:
        if service not in SERVICE_NAMES:
            raise ValueError(f"service must be 'dynamodb' or 'dynamodbstreams', not {service!r}")
        self._engine = engine
        self._region = region or engine.default_region
        self._service_name: ServiceName = service
        self._engine_service: Service = SERVICE_NAMES[service]
        self._codec = _codec(service)
        self._validator = ParamValidator() if validate else None
        self.meta = _Meta(self._region, self._codec.model)
        self._methods: dict[str, str] = {}
        self._methods_for = -1

    # -- surface -------------------------------------------------------------------------------

    @property
    def exceptions(self) -> Any:
        return self._codec.exceptions

    @property
    def engine(self) -> Engine:
        return self._engine

    def _method_names(self) -> dict[str, str]:
        table = operation_table(self._engine_service)
        if self._methods_for != len(table):
            names = {xform_name(op): op for op in self._codec.model.operation_names}
            names.update((xform_name(op), op) for op in table)
            self._methods = names
            self._methods_for = len(table)
        return self._methods

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        if name.startswith("_"):
            raise AttributeError(name)
        operation_name = self._method_names().get(name)
        if operation_name is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        method = self._make_method(name, operation_name)
        setattr(self, name, method)  # later lookups skip __getattr__
        return method

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._method_names()})

    def can_paginate(self, operation_name: str) -> bool:
        return self._paginator_config(operation_name) is not None

    def get_paginator(self, operation_name: str) -> Paginator:
        config = self._paginator_config(operation_name)
        if config is None:
            raise botocore.exceptions.OperationNotPageableError(operation_name=operation_name)
        actual = self._method_names()[operation_name]
        return Paginator(
            getattr(self, operation_name), config, self._codec.model.operation_model(actual)
        )

    def get_waiter(self, waiter_name: str) -> Waiter:
        model = _waiter_model(self._service_name)
        if model is None or waiter_name not in {xform_name(n) for n in model.waiter_names}:
            raise ValueError(f"Waiter does not exist: {waiter_name}")
        real = next(n for n in model.waiter_names if xform_name(n) == waiter_name)
        config = model.get_waiter(real)
        method = NormalizedOperationMethod(getattr(self, xform_name(config.operation)))
        return Waiter(real, config, method)

    @property
    def waiter_names(self) -> list[str]:
        model = _waiter_model(self._service_name)
        return [] if model is None else sorted(map(xform_name, model.waiter_names))

    def close(self) -> None:
        """Nothing to release (the engine is the caller's); present for boto3 parity."""

    def _paginator_config(self, method_name: str) -> dict[str, Any] | None:
        actual = self._method_names().get(method_name)
        model = _paginator_model(self._service_name)
        if actual is None or model is None:
            return None
        try:
            return model.get_paginator(actual)  # type: ignore[no-any-return]
        except ValueError:
            return None

    # -- the call path -------------------------------------------------------------------------

    def _make_method(self, py_name: str, operation_name: str) -> Callable[..., dict[str, Any]]:
        plan = self._codec.plan(operation_name)
        execute = self._engine.execute
        run = self._engine.run
        table = operation_table(self._engine_service)
        region = self._region
        service = self._engine_service
        codec = self._codec
        http_date = self._engine.clock.http_date
        idempotent = plan.idempotent
        transform_in = plan.input
        transform_out = plan.output
        validator = self._validator if plan.modeled else None
        input_shape = plan.operation_model.input_shape if plan.operation_model else None

        def call(*args: Any, **kwargs: Any) -> dict[str, Any]:
            if args:
                raise TypeError(f"{py_name}() only accepts keyword arguments.")
            for member in idempotent:
                if member not in kwargs:
                    kwargs[member] = str(uuid.uuid4())
            if validator is not None and input_shape is not None:
                report = validator.validate(kwargs, input_shape)
                if report.has_errors():
                    raise ParamValidationError(report=report.generate_report())
            if holds_surrogate(kwargs):  # as over HTTP, where no such body can be sent
                raise codec.client_error(UNREADABLE, operation_name, new_request_id(), http_date())
            request: dict[str, Any] = kwargs if transform_in is None else transform_in(kwargs)
            fn = table.get(operation_name)  # looked up per call: operations may come later
            try:
                if fn is None:  # not (yet) implemented: the engine's own answer
                    result = execute(
                        operation_name, request, region=region, wire=False, service=service
                    )
                else:
                    result = run(fn, operation_name, request, region, False)
            except DynamoDBError as error:
                raise codec.client_error(
                    error, operation_name, new_request_id(), http_date()
                ) from None
            except Exception as exc:
                # A bug in the engine: surface it as DynamoDB would (500), chained for debugging.
                log.exception("engine failed on %s", operation_name)
                failure = DynamoDBError("InternalServerError", "Internal server error")
                raise codec.client_error(
                    failure, operation_name, new_request_id(), http_date()
                ) from exc
            if transform_out is not None:
                result = transform_out(result)
            request_id = new_request_id()
            # A copy, so that the engine is free to hand out shared (e.g. constant) dicts.
            return {
                **result,
                "ResponseMetadata": {
                    "RequestId": request_id,
                    "HTTPStatusCode": 200,
                    "HTTPHeaders": {
                        "x-amzn-requestid": request_id,
                        "content-type": CONTENT_TYPE,
                        "date": http_date(),
                    },
                    "RetryAttempts": 0,
                },
            }

        call.__name__ = py_name
        call.__qualname__ = f"DirectClient.{py_name}"
        call.__doc__ = f"Call the {operation_name} operation in-process (boto3's ``{py_name}``)."
        return call

    def __repr__(self) -> str:
        return f"<DirectClient {self._service_name} region={self._region!r}>"


@functools.cache
def _paginator_model(service_name: str) -> PaginatorModel | None:
    try:
        return PaginatorModel(_loader().load_service_model(service_name, "paginators-1"))
    except botocore.exceptions.DataNotFoundError:
        return None


@functools.cache
def _waiter_model(service_name: str) -> WaiterModel | None:
    try:
        return WaiterModel(_loader().load_service_model(service_name, "waiters-2"))
    except botocore.exceptions.DataNotFoundError:
        return None
