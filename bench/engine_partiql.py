"""Issue 28: a PartiQL ``SELECT`` by full key against ``GetItem`` on the same bound client.

The statement runs as the GetItem it is equivalent to (operations/partiql.py), so what it
adds is its own work: the request's shape through botocore, the cached parse, the plan, and
the inner call. Target: at least 1/1.5 of GetItem's throughput (within 1.5x its time).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ._common import Contender, Section, Settings, Table, Target, run_interleaved, scratch_dir

TABLE = "bench-partiql"
KEYS = 1000
SHARE = 1 / 1.5  # PartiQL SELECT >= 1/1.5 of GetItem's throughput
GET = "GetItem"
SELECT = "PartiQL SELECT by key"
FLOOR = "ExecuteStatement answered by GetItem"
STATEMENT = f'SELECT * FROM "{TABLE}" WHERE pk = ?'


def _key(i: int) -> dict[str, Any]:
    return {"pk": {"S": f"k{i % KEYS:04d}"}}


class _Bound(Contender):
    """One engine on a file and ``local_client(engine)``, a table of KEYS items."""

    def __init__(self, name: str, directory: str) -> None:
        self.name = name
        self.directory = directory
        self.engine: Any = None
        self.client: Any = None

    def setup(self) -> None:
        from firstwrite.engine import Engine, local_client

        self.engine = Engine(f"{self.directory}/{self.name.replace(' ', '-')}.db")
        self.client = local_client(self.engine)
        self.client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for i in range(KEYS):
            self.client.put_item(TableName=TABLE, Item={**_key(i), "v": {"S": "x" * 100}})

    def teardown(self) -> None:
        if self.engine is not None:
            self.engine.close()


class GetItem(_Bound):
    def op(self, i: int) -> None:
        if "Item" not in self.client.get_item(TableName=TABLE, Key=_key(i)):
            raise AssertionError("GetItem found no item")


class Select(_Bound):
    def op(self, i: int) -> None:
        answer = self.client.execute_statement(Statement=STATEMENT, Parameters=[_key(i)["pk"]])
        if len(answer["Items"]) != 1:
            raise AssertionError("SELECT by key found no item")


class Floor(Select):
    """The same ExecuteStatement call, answered at ``before-call`` by the engine's GetItem:
    botocore's half of ExecuteStatement plus GetItem's work, and no PartiQL at all."""

    def setup(self) -> None:
        super().setup()
        from botocore.awsrequest import AWSResponse

        engine = self.engine

        def answer(params: dict[str, Any], **_kw: Any) -> tuple[AWSResponse, dict[str, Any]]:
            body = json.loads(params["body"])
            got = engine.execute(
                "GetItem",
                {"TableName": TABLE, "Key": {"pk": body["Parameters"][0]}},
                wire=True,
            )
            return AWSResponse("", 200, {}, None), {"Items": [got["Item"]]}

        self.client.meta.events.register_first("before-call.dynamodb.ExecuteStatement", answer)


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="partiql",
        title="PartiQL SELECT by key vs GetItem, same bound client (issue 28)",
        method=[
            f"`local_client(Engine(<file>))`, a table of {KEYS} items of ~110 bytes; each call "
            "reads one of them by key.",
            f"**{GET}**: `get_item(TableName, Key)`. **{SELECT}**: "
            f"`execute_statement(Statement='{STATEMENT}', Parameters=[pk])`, which the engine "
            "runs as that GetItem.",
            f"**{FLOOR}**: the same `execute_statement` call answered at `before-call` by the "
            "engine's GetItem (no parse, no plan): botocore's half of ExecuteStatement plus "
            f"GetItem's work. It bounds the target: if it misses {1 / SHARE:g}x too, no "
            "PartiQL layer on this client can meet it.",
            f"{settings.reps} repetitions of {settings.duration:g} s each, interleaved; the "
            "ratio is the median of per-repetition ratios.",
        ],
    )
    with scratch_dir("partiql-") as directory:
        log("  partiql / select by key")
        contenders: list[Contender] = [
            GetItem(GET, directory),
            Select(SELECT, directory),
            Floor(FLOOR, directory),
        ]
        series, skipped = run_interleaved(contenders, settings, log=log)
        table = Table(
            title="SELECT by key",
            series=series,
            ours=[SELECT],
            targets=[Target(SELECT, GET, minimum=SHARE, bound=FLOOR)],
            skipped=skipped,
        )
        table.budget_note(SELECT, GET, SHARE)
        section.tables.append(table)
    return section
