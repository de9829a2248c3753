"""``mock_dynamodb``: every DynamoDB client that code under test creates is answered in process.

The code under test is ``library.py``: it builds its own clients (``boto3.client``,
``boto3.resource``, ``Session().client``, aiobotocore's ``create_client``, one at import time)
and knows nothing of firstwrite. Each test checks the answer came from the engine by reading
the engine directly, and that other services are left alone.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.handlers
import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.testing import Redirect, install, mock_dynamodb
from firstwrite.testing import redirect as redirect_module

from . import library


def _engine_order_ids(engine: Engine) -> list[str]:
    items = engine.execute("Scan", {"TableName": library.TABLE})["Items"]
    return sorted(item["pk"]["S"] for item in items)


def _engine_tables(engine: Engine) -> list[str]:
    return list(engine.execute("ListTables", {})["TableNames"])


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No AWS configuration at all, as on a fresh CI machine."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_DEFAULT_REGION",
        "AWS_REGION",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)


def test_every_kind_of_client_the_library_creates_is_answered_by_the_engine(
    clean_env: None,
) -> None:
    with mock_dynamodb() as engine:
        library.create_orders_table()
        assert library.place_order("o-1", 10) is True
        assert library.place_order("o-1", 99) is False  # the conditional put failed
        assert library.place_order("o-2", 20) is True
        assert library.order_amount_via_resource("o-1") == 10
        assert library.order_ids_via_session() == ["o-1", "o-2"]
        # Created at import time, before any redirect, with credentials of its own.
        assert library.order_ids_via_module_client() == ["o-1", "o-2"]
        assert _engine_order_ids(engine) == ["o-1", "o-2"]
        assert engine.execute("GetItem", {"TableName": "orders", "Key": {"pk": {"S": "o-1"}}})[
            "Item"
        ]["amount"] == {"N": "10"}


def test_an_aiobotocore_client_is_answered_by_the_engine(clean_env: None) -> None:
    with mock_dynamodb() as engine:
        library.create_orders_table()
        library.place_order("o-1", 1)
        library.place_order("o-2", 2)
        assert asyncio.run(library.order_count_async()) == 2
        assert _engine_order_ids(engine) == ["o-1", "o-2"]


def test_a_configured_endpoint_is_overridden(clean_env: None) -> None:
    # Nothing listens on port 9 (discard): an answer can only come from the engine.
    with mock_dynamodb():
        library.create_orders_table()
        library.place_order("o-1", 1)
        assert library.order_ids_via_session(endpoint_url="http://127.0.0.1:9") == ["o-1"]


def test_dynamodb_streams_clients_are_answered_by_the_engine(clean_env: None) -> None:
    with mock_dynamodb() as engine:
        library.create_orders_table()
        boto3.client("dynamodb").update_table(
            TableName=library.TABLE,
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )
        arn = engine.execute("DescribeTable", {"TableName": library.TABLE})["Table"][
            "LatestStreamArn"
        ]
        assert library.stream_arns() == [arn]


def test_other_services_are_not_touched(clean_env: None) -> None:
    with mock_dynamodb() as engine:
        s3 = library.s3_client()
        assert not isinstance(s3, redirect_module._Redirectable)
        sent: list[str] = []

        def canned(request: Any, **_kwargs: Any) -> AWSResponse:
            sent.append(request.url)
            body = b"<ListAllMyBucketsResult><Buckets/></ListAllMyBucketsResult>"

            class Raw:
                def stream(self, **_kw: Any) -> Iterator[bytes]:
                    yield body

            return AWSResponse(request.url, 200, {}, Raw())

        s3.meta.events.register("before-send.s3", canned)
        assert s3.list_buckets()["Buckets"] == []
        assert sent and sent[0].startswith("https://s3.")  # went out toward S3 itself
        assert _engine_tables(engine) == []


def test_moto_keeps_serving_other_services_beside_the_redirect(clean_env: None) -> None:
    from moto import mock_aws

    with mock_aws(), mock_dynamodb() as engine:
        s3 = library.s3_client()
        s3.create_bucket(Bucket="receipts")
        library.create_orders_table()
        library.place_order("o-1", 1)
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["receipts"]  # moto's
        assert _engine_order_ids(engine) == ["o-1"]
    with mock_aws():
        # moto never saw the DynamoDB calls: its own fresh backend has no table.
        client = boto3.client("dynamodb", region_name="us-east-1")
        assert client.list_tables()["TableNames"] == []


def test_racing_threads_with_their_own_clients_get_one_winner_per_key(clean_env: None) -> None:
    threads, keys = 8, 40
    wins: dict[str, int] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            for k in range(keys):
                if library.place_order(f"o-{k}", k):
                    with lock:
                        wins[f"o-{k}"] = wins.get(f"o-{k}", 0) + 1
        except BaseException as exc:
            errors.append(exc)

    with mock_dynamodb() as engine:
        library.create_orders_table()
        pool = [threading.Thread(target=worker) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert errors == []
        assert wins == {f"o-{k}": 1 for k in range(keys)}
        assert len(_engine_order_ids(engine)) == keys


def test_redirects_nest_and_the_innermost_answers(clean_env: None) -> None:
    with mock_dynamodb() as outer:
        library.create_orders_table()
        with mock_dynamodb() as inner:
            library.create_orders_table()
            library.place_order("inner", 1)
            assert _engine_order_ids(inner) == ["inner"]
        library.place_order("outer", 1)
        assert _engine_order_ids(outer) == ["outer"]


def test_an_explicitly_bound_client_keeps_its_engine() -> None:
    with Engine() as mine, mock_dynamodb() as redirected:
        client = local_client(mine)
        client.create_table(
            TableName="mine",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        assert _engine_tables(mine) == ["mine"]
        assert _engine_tables(redirected) == []


def test_a_stubber_still_wins_inside_a_redirect(clean_env: None) -> None:
    with mock_dynamodb() as engine:
        client = boto3.client("dynamodb")
        with Stubber(client) as stub:
            stub.add_response("list_tables", {"TableNames": ["stubbed"]})
            assert client.list_tables()["TableNames"] == ["stubbed"]
        assert client.list_tables()["TableNames"] == []  # the engine again
        assert _engine_tables(engine) == []


def test_after_the_redirect_a_client_talks_to_its_endpoint_again(clean_env: None) -> None:
    client = library.MODULE_CLIENT
    with mock_dynamodb():
        library.create_orders_table()
        assert client.list_tables()["TableNames"] == ["orders"]
    sent: list[str] = []

    def canned(request: Any, **_kwargs: Any) -> AWSResponse:
        sent.append(request.url)
        return AWSResponse(request.url, 200, {}, _RawBody(b'{"TableNames":["aws"]}'))

    client.meta.events.register("before-send.dynamodb", canned, unique_id="test-canned")
    try:
        assert client.list_tables()["TableNames"] == ["aws"]
    finally:
        client.meta.events.unregister("before-send.dynamodb", unique_id="test-canned")
    assert sent == ["https://dynamodb.us-east-1.amazonaws.com/"]


class _RawBody:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_kwargs: Any) -> Iterator[bytes]:
        yield self.body


def test_the_environment_is_faked_inside_and_restored_after(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDREAL")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "real-token")
    boto3.setup_default_session(region_name="eu-west-1")
    before = boto3.DEFAULT_SESSION
    with mock_dynamodb(region="ap-southeast-2"):
        assert (
            os.environ["AWS_ACCESS_KEY_ID"] == redirect_module.FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"]
        )
        assert "AWS_SESSION_TOKEN" not in os.environ
        assert os.environ["AWS_DEFAULT_REGION"] == "ap-southeast-2"
        assert boto3.DEFAULT_SESSION is not before
        assert boto3.client("dynamodb").meta.region_name == "ap-southeast-2"
    assert os.environ["AWS_ACCESS_KEY_ID"] == "AKIDREAL"
    assert os.environ["AWS_SESSION_TOKEN"] == "real-token"
    assert "AWS_DEFAULT_REGION" not in os.environ
    assert boto3.DEFAULT_SESSION is before


def test_a_configured_region_and_credentials_false_are_respected(
    clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDMINE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "my-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    with mock_dynamodb(credentials=False) as engine:
        assert os.environ["AWS_ACCESS_KEY_ID"] == "AKIDMINE"
        assert os.environ["AWS_DEFAULT_REGION"] == "eu-central-1"
        client = boto3.client("dynamodb")
        assert client.meta.region_name == "eu-central-1"
        library.create_orders_table()
        # The engine keeps tables per region, as DynamoDB does.
        regional = engine.execute("ListTables", {}, region="eu-central-1")["TableNames"]
        assert regional == ["orders"]
        assert _engine_tables(engine) == []  # us-east-1


def test_each_redirect_starts_a_new_default_session(clean_env: None) -> None:
    sessions: list[Any] = []
    hooks: list[list[str]] = []
    for _ in range(2):
        with mock_dynamodb():
            sessions.append(boto3.DEFAULT_SESSION)
            calls: list[str] = []
            hooks.append(calls)
            # A handler a test registers on the default session must not reach the next test.
            boto3.DEFAULT_SESSION.events.register(
                "before-call.dynamodb", lambda calls=calls, **_kw: calls.append("hook")
            )
            boto3.client("dynamodb").list_tables()
            assert boto3.resource("dynamodb").Table("t").name == "t"  # boto3's own data loads
    assert hooks == [["hook"], ["hook"]]
    assert sessions[0] is not sessions[1]
    loader = sessions[1]._session.get_component("data_loader")
    assert len(loader.search_paths) == len(set(loader.search_paths))


def test_as_a_decorator_each_call_gets_a_fresh_engine(clean_env: None) -> None:
    seen: list[list[str]] = []

    @mock_dynamodb
    def one_test() -> None:
        seen.append(boto3.client("dynamodb").list_tables()["TableNames"])
        library.create_orders_table()

    one_test()
    one_test()  # no ResourceInUseException: the first call's table went with its engine
    assert seen == [[], []]


def test_as_a_decorator_with_arguments_on_a_coroutine_function(clean_env: None) -> None:
    with Engine() as engine:

        @mock_dynamodb(engine=engine)
        async def one_test() -> int:
            library.create_orders_table()
            library.place_order("o-1", 1)
            return await library.order_count_async()

        assert asyncio.run(one_test()) == 1
        assert _engine_order_ids(engine) == ["o-1"]  # the given engine, still open


def test_a_class_cannot_be_decorated() -> None:
    with pytest.raises(TypeError, match="usefixtures"):

        @mock_dynamodb
        class Tests:  # pragma: no cover - never built
            pass


def test_a_redirect_cannot_be_entered_twice() -> None:
    redirect = Redirect()
    with redirect, pytest.raises(RuntimeError, match="already active"), redirect:
        pass


def test_install_is_idempotent_and_registers_one_handler_per_service() -> None:
    install()
    install()
    mine = [
        event
        for event, handler, *_ in botocore.handlers.BUILTIN_HANDLERS
        if handler is redirect_module._on_creating_client_class
    ]
    assert sorted(mine) == [
        "creating-client-class.dynamodb",
        "creating-client-class.dynamodb-streams",
    ]


def test_requests_answered_are_counted(clean_env: None) -> None:
    before = redirect_module.answered()
    with mock_dynamodb():
        boto3.client("dynamodb").list_tables()
        boto3.client("dynamodb").list_tables()
    assert redirect_module.answered() == before + 2
