"""Every validation message of the expression language, exact strings."""

from __future__ import annotations

import pytest
from expr_helpers import N, S, compile_, error

V = {":v": S("x"), ":n": N(1), ":w": S("y")}


def cond(expression: str, **kw: object) -> str:
    kw.setdefault("values", {k: v for k, v in V.items() if k in expression} or None)
    return error(condition=expression, **kw)


class TestSyntax:
    @pytest.mark.parametrize(
        ("expression", "message"),
        [
            ("foo", 'Syntax error; token: "<EOF>", near: "foo"'),
            ("a = ", 'Syntax error; token: "<EOF>", near: "= "'),
            ("a == :v", 'Syntax error; token: "=", near: "== :v"'),
            ("a = :v AND", 'Syntax error; token: "<EOF>", near: "AND"'),
            ("a = :v b", 'Syntax error; token: "b", near: ":v b"'),
            ("a[-1] = :v", 'Syntax error; token: "-", near: "[-1"'),
            ("a[] = :v", 'Syntax error; token: "]", near: "[] ="'),
            ("a = :v = :w", 'Syntax error; token: "=", near: ":v = :w"'),
            ("foo AND b = :v", 'Syntax error; token: "AND", near: "foo AND b"'),
        ],
    )
    def test_condition(self, expression: str, message: str) -> None:
        assert cond(expression) == "Invalid ConditionExpression: " + message

    @pytest.mark.parametrize(
        ("expression", "message"),
        [
            ("SET attrName = 3", 'Syntax error; token: "3", near: "= 3"'),
            ("SET a = numx / :v", 'Syntax error; token: "/", near: "numx / :v"'),
            ("SET", 'Syntax error; token: "<EOF>", near: "SET"'),
            ("SET a = b + c + d", 'Syntax error; token: "+", near: "c + d"'),
            ("SET a = :v +", 'Syntax error; token: "<EOF>", near: "+"'),
            ("PUT a = :v", 'Syntax error; token: "PUT", near: "PUT a"'),
        ],
    )
    def test_update(self, expression: str, message: str) -> None:
        values = {k: v for k, v in V.items() if k in expression} or None
        assert error(update=expression, values=values) == "Invalid UpdateExpression: " + message

    def test_projection_and_each_kind_is_named(self) -> None:
        assert error(projection="a,") == (
            'Invalid ProjectionExpression: Syntax error; token: "<EOF>", near: ","'
        )
        assert error(projection="a b") == (
            'Invalid ProjectionExpression: Syntax error; token: "b", near: "a b"'
        )
        assert error(filter="x").startswith("Invalid FilterExpression: Syntax error")
        assert error(key_condition=":v pk", values={":v": S("x")}) == (
            'Invalid KeyConditionExpression: Syntax error; token: "pk", near: ":v pk"'
        )

    @pytest.mark.parametrize(
        "kind", ["condition", "update", "projection", "filter", "key_condition"]
    )
    def test_empty(self, kind: str) -> None:
        label = {"key_condition": "KeyCondition"}.get(kind, kind.capitalize())
        assert error(**{kind: ""}) == f"Invalid {label}Expression: The expression can not be empty;"

    def test_size_limit_before_syntax(self) -> None:
        text = "a = :v AND " * 400 + "((("  # > 4096 bytes and not even valid
        assert cond(text, values=None) == (
            "Invalid ConditionExpression: Expression size has exceeded the maximum allowed size; "
            f"expression size: {len(text)}"
        )
        ok = "attribute_exists(" + "a" * 4078 + ")"
        assert len(ok) == 4096
        error_text = error(condition=ok + " ")
        assert "expression size: 4097" in error_text

    def test_redundant_parentheses(self) -> None:
        message = "Invalid ConditionExpression: The expression has redundant parentheses;"
        assert cond("((a = :v))") == message
        assert cond("((a)) = :v") == message
        assert cond("NOT ((a = :v)) AND b = :w") == message


class TestPlaceholders:
    def test_empty_maps(self) -> None:
        assert error(condition="a = :v", names={}) == "ExpressionAttributeNames must not be empty"
        assert error(condition="a = b", values={}) == "ExpressionAttributeValues must not be empty"

    @pytest.mark.parametrize("key", ["x", "#", "#a-b", "#a b", ""])
    def test_invalid_name_key(self, key: str) -> None:
        assert error(condition="a = b", names={key: "x"}) == (
            f'ExpressionAttributeNames contains invalid key: Syntax error; key: "{key}"'
        )

    @pytest.mark.parametrize("key", ["v", ":", ":a.b"])
    def test_invalid_value_key(self, key: str) -> None:
        assert error(condition="a = b", values={key: N(1)}) == (
            f'ExpressionAttributeValues contains invalid key: Syntax error; key: "{key}"'
        )

    def test_invalid_values(self) -> None:
        assert error(condition="a = :v", values={":v": {"N": "dog"}}) == (
            "ExpressionAttributeValues contains invalid value: "
            "The parameter cannot be converted to a numeric value for key :v"
        )
        assert error(update="ADD s :e", values={":e": {"SS": []}}) == (
            "ExpressionAttributeValues contains invalid value: "
            "One or more parameter values were invalid: An string set  may not be empty"
        )
        assert error(condition="a = :v", values={":v": {}}) == (
            "ExpressionAttributeValues contains invalid value: Supplied AttributeValue is empty, "
            "must contain exactly one of the supported datatypes for key :v"
        )

    def test_undefined(self) -> None:
        assert cond("#a = :v") == (
            "Invalid ConditionExpression: An expression attribute name used in the document "
            "path is not defined; attribute name: #a"
        )
        assert error(condition="a = :zz") == (
            "Invalid ConditionExpression: An expression attribute value used in expression is "
            "not defined; attribute value: :zz"
        )

    def test_unused_is_reported_across_all_expressions(self) -> None:
        assert error(condition="a = :v", values={":v": N(1), ":u": N(2), ":t": N(3)}) == (
            "Value provided in ExpressionAttributeValues unused in expressions: keys: {:u, :t}"
        )
        assert error(condition="a = :v", names={"#u": "x"}, values={":v": N(1)}) == (
            "Value provided in ExpressionAttributeNames unused in expressions: keys: {#u}"
        )
        # A name used by only one of the request's expressions counts as used.
        assert (
            error(
                condition="#a = :v",
                projection="#b",
                names={"#a": "a", "#b": "b", "#c": "c"},
                values={":v": N(1)},
            )
            == "Value provided in ExpressionAttributeNames unused in expressions: keys: {#c}"
        )

    def test_short_circuited_parts_still_count(self) -> None:
        # attribute_not_exists(pk) is true for a missing item, but :late is still validated.
        assert error(condition="attribute_not_exists(pk) OR x = :late") == (
            "Invalid ConditionExpression: An expression attribute value used in expression is "
            "not defined; attribute value: :late"
        )

    def test_reserved_words(self) -> None:
        assert cond("status = :v") == (
            "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: status"
        )
        assert error(projection="a.Comment") == (
            "Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: Comment"
        )
        # Through a placeholder it is fine, and REMOVE is not a reserved word.
        error_free = {"#s": "status"}
        from firstwrite.engine.expressions import compile_expressions

        assert compile_expressions(projection="#s, remove", names=error_free).projection is not None


class TestFunctionsAndOperands:
    @pytest.mark.parametrize(
        ("expression", "message"),
        [
            ("BegIns_WiTh(a, :v)", "Invalid function name; function: BegIns_WiTh"),
            ("dog(a)", "Invalid function name; function: dog"),
            (
                "size(a)",
                "The function is not allowed to be used this way in an expression; function: size",
            ),
            (
                "attribute_exists(a) = :v",
                "The function is not allowed to be used this way in an expression; function: attribute_exists",
            ),
            (
                "size(attribute_exists(a)) = :n",
                "The function is not allowed to be used this way in an expression; function: attribute_exists",
            ),
            (
                "if_not_exists(a, :v) = :v",
                "The function is not allowed in a condition expression; function: if_not_exists",
            ),
            (
                "size(a, a) = :n",
                "Incorrect number of operands for operator or function; operator or function: size, number of operands: 2",
            ),
            (
                "attribute_exists(a, b)",
                "Incorrect number of operands for operator or function; operator or function: attribute_exists, number of operands: 2",
            ),
            (
                "contains(a, a)",
                "The first operand must be distinct from the remaining operands for this operator or function; operator: contains, first operand: [a]",
            ),
            (
                "a.b[1] = a.b[1]",
                "The first operand must be distinct from the remaining operands for this operator or function; operator: =, first operand: [a, b, [1]]",
            ),
            (
                "attribute_exists(:v)",
                "Operator or function requires a document path; operator or function: attribute_exists",
            ),
            (
                "begins_with(a, :n)",
                "Incorrect operand type for operator or function; operator or function: begins_with, operand type: N",
            ),
            (
                "size(:n) > :n",
                "Incorrect operand type for operator or function; operator or function: size, operand type: N",
            ),
            (
                "size(size(a)) > :n",
                "Incorrect operand type for operator or function; operator or function: size, operand type: N",
            ),
            (
                "attribute_type(a, :n)",
                "Incorrect operand type for operator or function; operator or function: attribute_type, operand type: N",
            ),
            (
                "attribute_type(a, :w)",
                "Invalid attribute type name found; type: y, valid types: {B,NULL,SS,BOOL,L,BS,N,NS,S,M}",
            ),
            (
                "a < :l",
                "Incorrect operand type for operator or function; operator or function: <, operand type: L",
            ),
        ],
    )
    def test_condition_messages(self, expression: str, message: str) -> None:
        values = {k: v for k, v in {**V, ":l": {"L": []}}.items() if k in expression} or None
        assert cond(expression, values=values) == "Invalid ConditionExpression: " + message

    def test_between_bounds(self) -> None:
        assert cond("a BETWEEN :hi AND :lo", values={":hi": N(5), ":lo": N(3)}) == (
            "Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater "
            "than or equal to lower bound; lower bound operand: AttributeValue: {N:5}, upper bound "
            "operand: AttributeValue: {N:3}"
        )
        assert cond("a BETWEEN :n AND :v") == (
            "Invalid ConditionExpression: The BETWEEN operator requires same data type for lower "
            "and upper bounds; lower bound operand: AttributeValue: {N:1}, upper bound operand: "
            "AttributeValue: {S:x}"
        )

    def test_precedence_of_errors(self) -> None:
        # Redundant parentheses beat an unknown function, which beats a reserved word,
        # which beats an undefined value.
        assert cond("((dog(status) = :zz))", values=None).endswith("redundant parentheses;")
        assert cond("dog(status) = :zz", values=None).endswith("function: dog")
        assert cond("status = :zz", values=None).endswith("reserved keyword: status")


class TestLimits:
    def test_in_operand_limit(self) -> None:
        values = {f":v{i}": N(i) for i in range(101)}
        assert error(condition=f"a IN ({', '.join(values)})", values=values) == (
            "Invalid ConditionExpression: The IN operator is provided with too many operands; "
            "number of operands: 101"
        )
        del values[":v100"]
        from firstwrite.engine.expressions import compile_expressions

        compile_expressions(condition=f"a IN ({', '.join(values)})", values=values)

    def test_operator_limit(self) -> None:
        ok = " AND ".join(["attribute_exists(a)"] * 150)  # 150 functions + 149 ANDs = 299
        from firstwrite.engine.expressions import compile_expressions

        compile_expressions(condition=ok)
        too_many = " AND ".join(["attribute_exists(a)"] * 151)  # 301
        assert error(condition=too_many) == (
            "Invalid ConditionExpression: The expression contains too many operators; "
            "operator count: 301"
        )

    def test_path_depth(self) -> None:
        from firstwrite.engine.expressions import compile_expressions

        compile_expressions(projection="a" + ".b" * 31)
        assert error(projection="a" + ".b" * 32) == (
            "Invalid ProjectionExpression: The document path has too many nesting levels; "
            "nesting levels: 33"
        )

    def test_index_range(self) -> None:
        assert error(projection="a[99999999999999]") == (
            "Invalid ProjectionExpression: List index is not within the allowable range; "
            "index: [99999999999999]"
        )


class TestUpdateMessages:
    @pytest.mark.parametrize(
        ("expression", "message"),
        [
            (
                "SET a = :v SET b = :v",
                '1 validation error detected: Invalid UpdateExpression: The "SET" section can only be used once in an update expression;',
            ),
            (
                "REMOVE a ADD n :n remove b",
                '1 validation error detected: Invalid UpdateExpression: The "REMOVE" section can only be used once in an update expression;',
            ),
            (
                "SET a = :v, a = :w",
                "1 validation error detected: Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a]",
            ),
            (
                "SET a.b = :v REMOVE a",
                "1 validation error detected: Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a, b], path two: [a]",
            ),
            (
                "SET a[0] = :v REMOVE a.b",
                "1 validation error detected: Invalid UpdateExpression: Two document paths conflict with each other; must remove or rewrite one of these paths; path one: [a, [0]], path two: [a, b]",
            ),
            (
                "SET a = :v + :n",
                "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: +, operand type: S",
            ),
            (
                "SET a = list_append(:v, b)",
                "Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: list_append, operand type: S",
            ),
            (
                "SET a = list_append(b)",
                "Invalid UpdateExpression: Incorrect number of operands for operator or function; operator or function: list_append, number of operands: 1",
            ),
            (
                "SET a = if_not_exists(:v, :w)",
                "Invalid UpdateExpression: Operator or function requires a document path; operator or function: if_not_exists",
            ),
            (
                "SET a = size(b)",
                "Invalid UpdateExpression: The function is not allowed in an update expression; function: size",
            ),
            (
                "SET a = LIST_APPEND(b, c)",
                "Invalid UpdateExpression: Invalid function name; function: LIST_APPEND",
            ),
            (
                "ADD a :v",
                "Invalid UpdateExpression: Incorrect operand type for operator or function; operator: ADD, operand type: STRING",
            ),
            (
                "DELETE a :n",
                "Invalid UpdateExpression: Incorrect operand type for operator or function; operator: DELETE, operand type: NUMBER",
            ),
        ],
    )
    def test_messages(self, expression: str, message: str) -> None:
        values = {k: v for k, v in V.items() if k in expression} or None
        assert error(update=expression, values=values) == message

    def test_projection_overlap(self) -> None:
        assert error(projection="a, a") == (
            "Invalid ProjectionExpression: Two document paths overlap with each other; must "
            "remove or rewrite one of these paths; path one: [a], path two: [a]"
        )


class TestNamesAndFunctionArguments:
    """A bare name starts with a letter; a function's arguments are operands; list_append does
    not nest in list_append. Sources: the Developer Guide, "Expression attribute names": a
    name that begins with a number must be a placeholder; DynamoDB's answers quoted in
    ScyllaDB's test/alternator/test_update_expression.py (``Syntax error; token: "_", near:
    "SET _123"``; ``if_not_exists(c, :a+:b)`` a syntax error; ``list_append(list_append(...))``
    "not allowed to be used this way"), whose tests pass on DynamoDB."""

    @pytest.mark.parametrize(
        ("expression", "message"),
        [
            ("SET _123 = :n", 'Syntax error; token: "_", near: "SET _123"'),
            ("SET _abc = :n", 'Syntax error; token: "_", near: "SET _abc"'),
            ("SET 123a = :n", 'Syntax error; token: "123", near: "SET 123a"'),
            ("SET a = _f(b)", 'Syntax error; token: "_", near: "= _f"'),
            ("SET c = if_not_exists(c, :n + :n)", 'Syntax error; token: "+", near: ":n + :n"'),
        ],
    )
    def test_syntax(self, expression: str, message: str) -> None:
        values = {k: v for k, v in V.items() if k in expression} or None
        assert error(update=expression, values=values) == "Invalid UpdateExpression: " + message

    def test_names_may_hold_digits_and_underscores_after_a_letter(self) -> None:
        for expression in ("SET alnum = :n", "SET Alpha_Numeric_123 = :n", "SET A123_ = :n"):
            assert compile_(update=expression, values={":n": N(1)}).update is not None

    def test_a_function_outside_a_sum_and_nested_if_not_exists_are_served(self) -> None:
        for expression in (
            "SET b = if_not_exists(b, :n) + :n",
            "SET a = if_not_exists(b, if_not_exists(c, :n))",
            "SET a = list_append(if_not_exists(a, :l), :l)",
        ):
            values = {k: v for k, v in {":n": N(1), ":l": {"L": []}}.items() if k in expression}
            assert compile_(update=expression, values=values).update is not None

    @pytest.mark.parametrize(
        "expression",
        [
            "SET a = list_append(list_append(:l, :l), :l)",
            "SET a = list_append(:l, (list_append(:l, :l)))",
        ],
    )
    def test_list_append_in_list_append(self, expression: str) -> None:
        assert error(update=expression, values={":l": {"L": []}}) == (
            "Invalid UpdateExpression: The function is not allowed to be used this way in an "
            "expression; function: list_append"
        )
