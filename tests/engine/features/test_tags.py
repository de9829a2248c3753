"""TagResource, UntagResource, ListTagsOfResource: through boto3, in process and over HTTP."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.operations import tags as tags_module


def create(ddb: Any, name: str, **extra: Any) -> str:
    response = ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "p", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "p", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )
    return str(response["TableDescription"]["TableArn"])


def tag_dict(ddb: Any, arn: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in ddb.list_tags_of_resource(ResourceArn=arn)["Tags"]}


def error_of(excinfo: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]


def test_tags_given_at_create_table_are_listed_and_not_described(ddb: Any, table_name: str) -> None:
    arn = create(
        ddb, table_name, Tags=[{"Key": "env", "Value": "prod"}, {"Key": "team", "Value": ""}]
    )
    assert tag_dict(ddb, arn) == {"env": "prod", "team": ""}
    assert "Tags" not in ddb.describe_table(TableName=table_name)["Table"]


def test_tag_overwrite_and_untag(ddb: Any, table_name: str) -> None:
    arn = create(ddb, table_name)
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == []
    ddb.tag_resource(
        ResourceArn=arn,
        Tags=[{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}, {"Key": " ", "Value": "9"}],
    )
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "a", "Value": "changed"}])
    assert tag_dict(ddb, arn) == {"a": "changed", "b": "2", " ": "9"}
    # Removing keys that are not there is legal.
    ddb.untag_resource(ResourceArn=arn, TagKeys=["b", "never-there"])
    assert tag_dict(ddb, arn) == {"a": "changed", " ": "9"}


def test_at_most_50_tags(ddb: Any, table_name: str) -> None:
    arn = create(ddb, table_name)
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": str(i), "Value": "v"} for i in range(30)])
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": str(i), "Value": "w"} for i in range(20, 50)])
    assert len(tag_dict(ddb, arn)) == 50
    with pytest.raises(ClientError) as excinfo:
        ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "one-more", "Value": "x"}])
    code, message = error_of(excinfo)
    assert code == "ValidationException"
    assert "50" in message
    assert "one-more" not in tag_dict(ddb, arn)


def test_create_table_with_too_many_tags_creates_nothing(ddb: Any, table_name: str) -> None:
    with pytest.raises(ClientError) as excinfo:
        create(ddb, table_name, Tags=[{"Key": str(i), "Value": "v"} for i in range(51)])
    assert error_of(excinfo)[0] == "ValidationException"
    with pytest.raises(ClientError) as excinfo:
        ddb.describe_table(TableName=table_name)
    assert error_of(excinfo)[0] == "ResourceNotFoundException"
    # The name is free: the refused CreateTable left no row behind.
    create(ddb, table_name)


@pytest.mark.parametrize(
    ("arn", "fragment"),
    [
        (
            "I_do_not_exist",
            "One or more parameter values were invalid: ARNs must start with 'arn:': "
            "I_do_not_exist",
        ),
        ("arn:not/a/good/format", "Invalid TableArn"),
        ("arn:aws:dynamodb:us-east-1:000000000000:stream/x", "Invalid TableArn"),
    ],
)
def test_malformed_arn_is_a_validation_error(ddb: Any, arn: str, fragment: str) -> None:
    """A ResourceArn that does not start with ``arn:`` is a ValidationException today.

    dynalite's test/listTagsOfResource.js and tagResource.js recorded an AccessDeniedException
    (``User: arn:aws:iam::<account>:... is not authorized to perform: dynamodb:TagResource on
    resource: abcd``) from the DynamoDB of their time; ScyllaDB's test/alternator/test_tag.py
    notes that newer DynamoDB answers a ValidationException saying ``ARNs must start with
    'arn:'``, and a live probe of DynamoDB in 2026 recorded the whole text, ``One or more
    parameter values were invalid: ARNs must start with 'arn:': not-an-arn``, for
    ListTagsOfResource and TagResource. The engine follows today's DynamoDB."""
    calls: tuple[Callable[[], Any], ...] = (
        lambda: ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "k", "Value": "v"}]),
        lambda: ddb.untag_resource(ResourceArn=arn, TagKeys=["k"]),
        lambda: ddb.list_tags_of_resource(ResourceArn=arn),
    )
    for call in calls:
        with pytest.raises(ClientError) as excinfo:
            call()
        code, message = error_of(excinfo)
        assert code == "ValidationException"
        assert fragment in message


def test_unknown_table_is_resource_not_found(ddb: Any, table_name: str) -> None:
    arn = create(ddb, table_name) + "x"
    with pytest.raises(ClientError) as excinfo:
        ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "k", "Value": "v"}])
    code, message = error_of(excinfo)
    assert code == "ResourceNotFoundException"
    assert arn in message
    with pytest.raises(ClientError) as excinfo:
        ddb.list_tags_of_resource(ResourceArn=arn)
    assert error_of(excinfo)[0] == "ResourceNotFoundException"


def test_deleted_table_has_no_tags(ddb: Any, table_name: str) -> None:
    arn = create(ddb, table_name, Tags=[{"Key": "k", "Value": "v"}])
    ddb.delete_table(TableName=table_name)
    with pytest.raises(ClientError) as excinfo:
        ddb.list_tags_of_resource(ResourceArn=arn)
    assert error_of(excinfo)[0] == "ResourceNotFoundException"


@pytest.mark.parametrize(
    "tag",
    [
        {"Key": "ok", "Value": "#!%^$&"},
        {"Key": "->>;-)])", "Value": "ok"},
        {"Key": "aws:reserved", "Value": "ok"},
        {"Key": "k" * 129, "Value": "ok"},
        {"Key": "ok", "Value": "v" * 257},
    ],
)
def test_invalid_tags_are_refused(ddb: Any, table_name: str, tag: dict[str, str]) -> None:
    arn = create(ddb, table_name)
    with pytest.raises(ClientError) as excinfo:
        ddb.tag_resource(ResourceArn=arn, Tags=[tag])
    assert error_of(excinfo)[0] == "ValidationException"
    assert tag_dict(ddb, arn) == {}


def test_unicode_letters_digits_and_allowed_punctuation(ddb: Any, table_name: str) -> None:
    arn = create(ddb, table_name)
    tags = {"законные буквы": "значение", "k_.:/=+-@9": "v_.:/=+-@ 0"}
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    assert tag_dict(ddb, arn) == tags


def test_empty_tag_list_is_refused(ddb: Any, table_name: str) -> None:
    arn = create(ddb, table_name)
    with pytest.raises(ClientError) as excinfo:
        ddb.tag_resource(ResourceArn=arn, Tags=[])
    assert error_of(excinfo)[0] == "ValidationException"


def test_next_token_pages_through_every_tag(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DynamoDB answers a table's (at most 50) tags in one page; a smaller page size exercises
    # the NextToken path that clients written for paging rely on.
    monkeypatch.setattr(tags_module, "PAGE_SIZE", 3)
    ddb = local_client(engine)
    arn = create(ddb, "paged-tags")
    expected = {f"key{i:02d}": str(i) for i in range(8)}
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in expected.items()])
    seen: dict[str, str] = {}
    pages = 0
    kwargs: dict[str, str] = {}
    while True:
        page = ddb.list_tags_of_resource(ResourceArn=arn, **kwargs)
        pages += 1
        assert len(page["Tags"]) <= 3
        seen.update({t["Key"]: t["Value"] for t in page["Tags"]})
        if "NextToken" not in page:
            break
        kwargs = {"NextToken": page["NextToken"]}
    assert seen == expected
    assert pages == 3


def test_concurrent_tag_changes_lose_none(ddb: Any, table_name: str) -> None:
    """Two threads each tag and untag their own key on one table: every change is seen by the
    ListTagsOfResource after it, and neither undoes the other's (each change reads and writes
    the tags in one write transaction). ScyllaDB's test_tag.py asks this in
    test_concurrent_tag (its issue 6389, where two read-modify-writes overwrote each other)."""
    arn = create(ddb, table_name, Tags=[{"Key": "kept", "Value": "1"}])
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def tag_untag(key: str) -> None:
        try:
            start.wait()
            for _ in range(100):
                ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": key, "Value": "Hello"}])
                assert tag_dict(ddb, arn).get(key) == "Hello"
                ddb.untag_resource(ResourceArn=arn, TagKeys=[key])
                assert key not in tag_dict(ddb, arn)
        except BaseException as failure:  # reported by the test's thread
            failures.append(failure)

    threads = [threading.Thread(target=tag_untag, args=(key,)) for key in "AB"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert tag_dict(ddb, arn) == {"kept": "1"}
