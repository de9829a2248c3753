"""An S3- and KMS-API server for the result store and cipher tests: moto in server mode, real
HTTP on loopback, driven with boto3 as users would drive AWS."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest


@pytest.fixture(scope="session")
def aws_url() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def aws_client(service: str, url: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def s3(aws_url: str) -> Any:
    return aws_client("s3", aws_url)


@pytest.fixture
def kms(aws_url: str) -> Any:
    return aws_client("kms", aws_url)


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"results-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=name)
    return name
