"""The quick path's compiled request building gives botocore's own User-Agent and endpoint.

:class:`CachedUserAgent` must return ``UserAgentString.to_string``'s string for every feature
set and client configuration, including after the configuration changed between calls;
:class:`CompiledEndpointParams` must return ``_get_provider_params``'s parameters, in the
same order, and register the same feature ids, for every operation of ``dynamodb`` and
``dynamodbstreams``, random parameters and clients of every endpoint setting. A bound client
then sends exactly what an unbound one sends.
"""

from __future__ import annotations

import functools
from typing import Any

import boto3
import botocore.session
import pytest
from botocore import useragent
from botocore.config import Config
from botocore.context import get_context, start_as_current_context
from botocore.useragent import _USERAGENT_FEATURE_MAPPINGS, UserAgentString, register_feature_id
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.request import CachedUserAgent, CompiledEndpointParams
from firstwrite.engine.binding.steps import shared_loader
from firstwrite.engine.binding.sync import bind, unbind
from firstwrite.engine.direct.client import service_model
from hypothesis_budget import examples

OPERATIONS = [
    (service, name)
    for service in ("dynamodb", "dynamodbstreams")
    for name in service_model(service).operation_names
]
FEATURES = sorted(_USERAGENT_FEATURE_MAPPINGS)
COMMON = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _client(service: str = "dynamodb", **kwargs: Any) -> Any:
    # A stock session each time; only botocore's parsed data files are shared (as the clients
    # of one session share them), so each client does not re-read them.
    core = botocore.session.Session()
    core.register_component("data_loader", shared_loader())
    session = boto3.session.Session(
        botocore_session=core,
        aws_access_key_id="AKIDTEST",
        aws_secret_access_key="secret",
        aws_account_id=kwargs.pop("account_id", None),
        region_name="us-east-1",
    )
    # unbound: the firstwrite pytest plugin may bind every new client
    return unbind(session.client(service, **kwargs))


configs = st.builds(
    Config,
    user_agent=st.sampled_from([None, "custom-agent/1.0"]),
    user_agent_extra=st.sampled_from([None, "extra/2", "weird chars ©"]),
    user_agent_appid=st.sampled_from([None, "my-app", "app with spaces"]),
    retries=st.sampled_from([None, {"mode": "standard"}, {"mode": "adaptive"}]),
)


@COMMON
@given(
    config=configs,
    later=configs,
    rounds=st.lists(st.lists(st.sampled_from(FEATURES), max_size=6), min_size=1, max_size=6),
)
def test_the_user_agent_is_botocores_string(
    config: Config, later: Config, rounds: list[list[str]]
) -> None:
    creator = _client(config=config)._user_agent_creator
    cached = CachedUserAgent.wrap(creator)
    assert isinstance(cached, CachedUserAgent)
    for i, features in enumerate(rounds):
        if i == len(rounds) // 2:  # a configuration changed in place between calls
            for name in ("user_agent_extra", "user_agent_appid", "retries"):
                setattr(creator._client_config, name, getattr(later, name))
        with start_as_current_context():
            for feature in features:
                register_feature_id(feature)
            assert cached.to_string() == creator.to_string()
            assert cached.to_string() == creator.to_string()  # and from the cache
    assert cached.to_string() == creator.to_string()  # outside any context


def test_the_user_agent_follows_a_replaced_modify_components(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    creator = _client()._user_agent_creator
    cached = CachedUserAgent(creator)
    before = cached.to_string()
    monkeypatch.setattr(useragent, "modify_components", lambda components: components[:1])
    assert cached.to_string() == creator.to_string() != before
    monkeypatch.undo()
    assert cached.to_string() == creator.to_string() == before
    creator._execution_env = "AWS_Lambda_python3.11"  # the creator's own fields changed
    assert cached.to_string() == creator.to_string() != before


def test_only_botocores_own_creator_is_wrapped() -> None:
    class Custom(UserAgentString):
        pass

    creator = Custom.from_environment()
    assert CachedUserAgent.wrap(creator) is creator


CLIENTS: list[dict[str, Any]] = [
    {},
    {"region_name": "eu-west-3"},
    {"region_name": "cn-north-1"},
    {"region_name": "us-gov-west-1"},
    {"config": Config(use_fips_endpoint=True)},
    {"config": Config(use_dualstack_endpoint=True)},
    {"account_id": "123456789012"},
    {"account_id": "123456789012", "config": Config(account_id_endpoint_mode="required")},
    {"config": Config(account_id_endpoint_mode="disabled")},
    {"endpoint_url": "http://localhost:8000"},
]


@functools.cache
def _endpoint_client(service: str, setting: int) -> Any:
    return _client(service, **CLIENTS[setting])


table_names = st.one_of(
    st.text(min_size=0, max_size=8),
    st.sampled_from(
        [
            "arn:aws:dynamodb:us-east-1:123456789012:table/orders",
            "arn:aws:dynamodb:eu-west-3:210987654321:table/t/index/i",
        ]
    ),
)


def _params(service: str, name: str, draw: Any) -> dict[str, Any]:
    """Call parameters with the members the ruleset reads (table names, ARNs, request maps)."""
    shape = service_model(service).operation_model(name).input_shape
    params: dict[str, Any] = {}
    if shape is None:
        return params
    for member, member_shape in shape.members.items():
        if not draw(st.booleans()):
            continue
        kind = member_shape.type_name
        if kind == "string":
            params[member] = draw(table_names)
        elif kind == "map":
            keys = draw(st.lists(table_names, max_size=3))
            params[member] = {key: {} for key in keys}
        elif kind == "list":
            params[member] = [
                {"Put": {"TableName": t}} for t in draw(st.lists(table_names, max_size=2))
            ]
    return params


@pytest.mark.parametrize(("service", "name"), OPERATIONS)
@COMMON
@given(data=st.data())
def test_the_endpoint_parameters_are_botocores(
    service: str, name: str, data: st.DataObject
) -> None:
    client = _endpoint_client(service, data.draw(st.integers(0, len(CLIENTS) - 1)))
    resolver = client._ruleset_resolver
    model = client.meta.service_model.operation_model(name)
    params = _params(service, name, data.draw)
    compiled = CompiledEndpointParams(resolver)
    for _ in range(2):  # the plan made, then reused
        expected = _outcome(resolver._get_provider_params, model, params)
        assert _outcome(compiled, model, params) == expected


def _outcome(resolve: Any, model: Any, params: dict[str, Any]) -> tuple[Any, ...]:
    """The parameters (in order) or the error, and the feature ids registered on the way."""
    with start_as_current_context():
        try:
            result: Any = list(resolve(model, params, {}).items())
        except Exception as error:  # botocore's own (a JMESPath type error on bad params)
            result = (type(error), str(error))
        return result, set(get_context().features)


def test_before_endpoint_resolution_hooks_still_change_the_builtins() -> None:
    client = _client()
    CompiledEndpointParams.wrap(client._ruleset_resolver)

    def fips(builtins: dict[str, Any], **_kwargs: Any) -> None:
        builtins["AWS::UseFIPS"] = True

    client.meta.events.register("before-endpoint-resolution.dynamodb", fips)
    seen: list[str] = []

    def answer(params: dict[str, Any], **_kwargs: Any) -> Any:
        seen.append(params["url"])
        raise RuntimeError("stop")

    client.meta.events.register("before-call.dynamodb", answer)
    with pytest.raises(RuntimeError):
        client.list_tables()
    assert seen == ["https://dynamodb-fips.us-east-1.amazonaws.com/"]


def _sent(client: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """What botocore built for each call, as the first ``before-call`` hook sees it."""
    seen: list[Any] = []

    def look(params: dict[str, Any], context: dict[str, Any], **_kwargs: Any) -> None:
        seen.append(
            (params["url"], dict(params["headers"]), params["body"], context.get("signing"))
        )

    client.meta.events.register_first("before-call.dynamodb", look)
    for method, kwargs in calls:
        try:
            getattr(client, method)(**kwargs)
        except (client.exceptions.ClientError, _Stop):
            pass
    return seen


def test_a_bound_client_sends_what_botocore_sends() -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_tables", {}),
        ("get_item", {"TableName": "orders", "Key": {"pk": {"S": "a"}}}),
        ("get_item", {"TableName": "arn:aws:dynamodb:us-east-1:1:table/x", "Key": {}}),
        ("batch_get_item", {"RequestItems": {"a": {"Keys": [{"pk": {"S": "1"}}]}}}),
    ]
    config = Config(user_agent_appid="app", retries={"mode": "standard"})
    bound = bind(_client(config=config, account_id="123456789012"), Engine())
    plain = _client(config=config, account_id="123456789012")

    def stop(**_kwargs: Any) -> Any:
        raise _Stop  # the unbound client goes no further than its before-call

    plain.meta.events.register("before-call.dynamodb", stop)
    assert _sent(bound, calls) == _sent(plain, calls)
    assert isinstance(bound._user_agent_creator, CachedUserAgent)
    unbind(bound)
    assert type(bound._user_agent_creator) is UserAgentString
    assert "_get_provider_params" not in vars(bound._ruleset_resolver)


class _Stop(Exception):
    pass
