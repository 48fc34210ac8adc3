"""A filter as one tree of ``Cmp`` / ``IsNull`` / ``And`` / ``Or`` / ``Not`` (and
``BlocksOnly``), and the forms it is given in parsed into it: pyarrow.parquet's DNF tuples, a
string of Python's expression syntax (the command line's ``--where``), a pyarrow compute
expression (read with its literals' types by idv._values.arrow_expressions). idv._scan.filters
binds a tree to a file. """
from __future__ import annotations

import ast
import copy
from typing import NamedTuple

import numpy as np

from idv._values import comparison, literals

MAX_DEPTH = 100          # of and / or / not nesting: deeper is refused, not a RecursionError
OPS = comparison.OPS
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


class Cmp(NamedTuple):
    """``column op value`` (op one of OPS; a list of values for in / not in)."""
    column: str
    op: str
    value: object


class IsNull(NamedTuple):
    """The column's value is missing (NaN, a key's 0), or with ``negate`` present.
    ``nan_is_null`` True or False: Arrow's null instead, of a pyarrow Expression's
    ``is_null(nan_is_null=...)`` / ``is_valid()``: NaN where it is True, a key's 0 where its
    KeyValues label it (an Arrow dictionary, whose missing entry is null), no other value."""
    column: str
    negate: bool = False
    nan_is_null: bool | None = None


class And(NamedTuple):
    parts: tuple


class Or(NamedTuple):
    parts: tuple


class Not(NamedTuple):
    part: object


class BlocksOnly(NamedTuple):
    """Skip the blocks `part` rules out, keep every row of the others (an engine that tests
    the rows itself, as polars does with its own predicate)."""
    part: object


# ---------------------------------------------------------------------------------------------
# the forms a filter is given in
# ---------------------------------------------------------------------------------------------

def parse(filter_):
    """The tree of a filter (DNF tuples, an expression string, a pyarrow Expression, or a tree
    already); ValueError saying what is not understood."""
    if isinstance(filter_, (Cmp, IsNull, And, Or, Not, BlocksOnly)):
        return _shallow(filter_)
    if isinstance(filter_, str):
        return _shallow(_from_python(filter_, filter_))
    if isinstance(filter_, (list, tuple)):
        return _shallow(_from_dnf(filter_))
    if type(filter_).__name__ == "Expression" and type(filter_).__module__.startswith("pyarrow"):
        from idv._values import arrow_expressions
        try:
            return _shallow(_from_arrow(arrow_expressions.tree(filter_)))
        except RecursionError:
            raise ValueError(f"the filter nests deeper than {MAX_DEPTH} levels") from None
        except ValueError as e:
            raise ValueError(f"cannot understand the filter {str(filter_)!r}: {e}") from None
    raise TypeError(f"a filter is a list of (column, op, value) tuples, an expression string or "
                    f"a pyarrow compute Expression, not {type(filter_).__name__}")


def _shallow(node):
    """`node`, or ValueError when its and / or / not nest deeper than MAX_DEPTH."""
    todo = [(node, 1)]
    while todo:
        n, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"the filter nests deeper than {MAX_DEPTH} levels: write it "
                             f"flatter (an in list, or and / or of many terms at one level)")
        if isinstance(n, (And, Or)):
            todo.extend((p, depth + 1) for p in n.parts)
        elif isinstance(n, (Not, BlocksOnly)):
            todo.append((n.part, depth + 1))
    return node


def _values(op, value):
    """A comparison's literal: the values of a collection for in / not in, as a list (other
    literals, str and bytes included, stay as given: binding refuses them)."""
    return list(value) if op in ("in", "not in") and literals.is_collection(value) else value


def _from_dnf(terms):
    if not terms:
        raise ValueError("an empty filter: give at least one (column, op, value) tuple")
    if all(isinstance(t, (list, tuple)) and t and isinstance(t[0], (list, tuple))
           for t in terms):
        return Or(tuple(_from_dnf(t) for t in terms))
    parts = []
    for t in terms:
        if not (isinstance(t, (list, tuple)) and len(t) == 3 and isinstance(t[0], str)):
            if len(terms) == 3 and isinstance(terms[0], str) and terms[1] in OPS + ("=",):
                raise ValueError(f"a filter is a list of (column, op, value) tuples: "
                                 f"[{tuple(terms)!r}], not the tuple alone")
            raise ValueError(f"a filter term is a (column, op, value) tuple, not {t!r}")
        column, op, value = t
        op = "==" if op == "=" else op
        if op not in OPS:
            raise ValueError(f"unknown filter operator {op!r} (one of {', '.join(OPS)})")
        parts.append(Cmp(column, op, _values(op, value)))
    return parts[0] if len(parts) == 1 else And(tuple(parts))


_AST_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
            ast.GtE: ">=", ast.In: "in", ast.NotIn: "not in"}


def _from_python(text, shown):
    try:
        tree = ast.parse(text.strip(), mode="eval").body
        return _node(tree, 1)
    except SyntaxError as e:        # Python's own text names "<unknown>, line 1"
        at = "" if (e.lineno or 1) != 1 or e.offset is None else \
            f" at character {e.offset}" if e.offset else " at its end"
        raise ValueError(f"cannot understand the filter {shown[:200]!r}: {e.msg}{at}") \
            from None
    except ValueError as e:
        raise ValueError(f"cannot understand the filter {shown[:200]!r}: {e}") from None
    except (RecursionError, MemoryError):
        raise ValueError(f"the filter {shown[:80]!r}... nests deeper than {MAX_DEPTH} "
                         f"levels") from None


_NUMBERS = {"nan": float("nan"), "NaN": float("nan"), "inf": float("inf")}


class _Numbers(ast.NodeTransformer):
    """`nan`, `NaN` and `inf` as the float constants they name."""

    def visit_Name(self, n):
        if n.id not in _NUMBERS:
            return n
        return ast.copy_location(ast.Constant(_NUMBERS[n.id]), n)


def _name(n):
    """A column named by a bare name or col("any name") (`nan`, `NaN` and `inf` are numbers:
    such a column is written col("inf"))."""
    if isinstance(n, ast.Name) and n.id not in _NUMBERS:
        return n.id
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("col",
                                                                                  "field") \
            and len(n.args) == 1 and isinstance(n.args[0], ast.Constant):
        return n.args[0].value
    return None


def _value(n):
    """A comparison's literal, `nan` and `inf` (Python has no literal for them) wherever a
    number may be, in a list too; ValueError naming what is not one (a column, an
    expression)."""
    try:
        return ast.literal_eval(_Numbers().visit(copy.deepcopy(n)))
    except ValueError:
        what = "not a literal value" if _name(n) is None else "a column" \
            if not isinstance(n, ast.Name) else \
            f"a name, read as a column (a string is written in quotes: {n.id!r})"
        # `a > 1 & b < 2`: & and | bind before comparisons, which pandas' query would say too
        hint = "; & and | join comparisons written in parentheses: (a > 1) & (b < 2)" \
            if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.BitAnd, ast.BitOr)) else ""
        raise ValueError(f"{ast.unparse(n)[:80]} is {what}: a filter compares a column with "
                         f"values written out (numbers, strings, lists of them for in), not "
                         f"with a column or an expression{hint}") from None


def _node(n, depth):
    if depth > MAX_DEPTH:
        raise ValueError(f"it nests deeper than {MAX_DEPTH} levels")
    if isinstance(n, ast.BoolOp):
        parts = tuple(_node(v, depth + 1) for v in n.values)
        return And(parts) if isinstance(n.op, ast.And) else Or(parts)
    if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.BitAnd, ast.BitOr)):
        # pandas' query and polars spell and / or so (each comparison in parentheses); a
        # chain a & b & c is one level, as a and b and c is
        kind, terms = type(n.op), []
        while isinstance(n, ast.BinOp) and isinstance(n.op, kind):
            terms.append(n.right)
            n = n.left
        parts = tuple(_node(t, depth + 1) for t in [n] + terms[::-1])
        return And(parts) if kind is ast.BitAnd else Or(parts)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.Not, ast.Invert)):
        return Not(_node(n.operand, depth + 1))
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
            n.func.id in ("isnull", "notnull") and len(n.args) == 1 and _name(n.args[0]):
        return IsNull(_name(n.args[0]), n.func.id == "notnull")
    if isinstance(n, ast.Compare):
        left, parts = n.left, []
        for op, right in zip(n.ops, n.comparators):
            sym = _AST_OPS.get(type(op))
            if isinstance(op, (ast.Is, ast.IsNot)):
                raise ValueError("missing values are tested by isnull(column) and "
                                 "notnull(column), not by is / is not")
            if sym is None:
                raise ValueError(f"unsupported operator {type(op).__name__}")
            if _name(left) is not None:
                column, value = _name(left), _value(right)
            elif _name(right) is not None and sym in _FLIP:
                column, value, sym = _name(right), _value(left), _FLIP[sym]
            else:
                raise ValueError("a comparison needs a column on one side and a value on the "
                                 "other")
            parts.append(Cmp(column, sym, _values(sym, value)))
            left = right
        return parts[0] if len(parts) == 1 else And(tuple(parts))
    raise ValueError(f"{ast.unparse(n)[:80]} is not a test of a column: a filter compares "
                     f"columns with values (==, !=, <, <=, >, >=, in, not in), tests "
                     f"isnull(column) / notnull(column), and joins them with and / &, "
                     f"or / |, not / ~")


_ARROW_CMP = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=",
              "greater": ">", "greater_equal": ">="}


def _from_arrow(node):
    """The filter tree of a pyarrow Expression's tree (idv._values.arrow_expressions.tree)."""
    if node[0] != "call":
        raise ValueError("a filter is a condition, not a column or a value alone")
    _, name, args, options = node
    fields = [a[1] for a in args if a[0] == "field"]
    if name in ("and_kleene", "and", "or_kleene", "or"):
        parts = tuple(_from_arrow(a) for a in args)
        return And(parts) if name.startswith("and") else Or(parts)
    if name == "invert" and len(args) == 1:
        return Not(_from_arrow(args[0]))
    if name in ("is_null", "is_valid") and len(args) == 1 and fields:
        return IsNull(fields[0], name == "is_valid",
                      bool((options or {}).get("nan_is_null", False)))
    if name == "is_in" and len(args) == 1 and fields:
        values = (options or {}).get("value_set", [])
        return Cmp(fields[0], "in", [_arrow_literal(v) for v in values])
    if name == "if_else" and len(args) == 3 and args[2] == ("literal", None):
        # DuckDB's x IN (...): if_else(is_valid(x), is_in(x, ...), null): rows where both hold
        return And((_from_arrow(args[0]), _from_arrow(args[1])))
    if name in _ARROW_CMP and len(args) == 2:
        op = _ARROW_CMP[name]
        if args[0][0] == "field" and args[1][0] == "literal":
            return Cmp(args[0][1], op, _arrow_literal(args[1][1]))
        if args[0][0] == "literal" and args[1][0] == "field":
            return Cmp(args[1][1], _FLIP[op], _arrow_literal(args[0][1]))
        raise ValueError("a comparison needs a column on one side and a value on the other")
    raise ValueError(f"idv's filters do not take {name}() here")


def _arrow_literal(value):
    """A pyarrow literal as filters compare it; ValueError for the ones they cannot."""
    if value is None:
        raise ValueError("it compares with null: test for it with is_null() / is_valid()")
    if isinstance(value, (bytes, bytearray)):
        raise ValueError("it compares with a bytes literal: give text columns a str "
                         "(pc.field(c) == \"abc\")")
    if not isinstance(value, (str, bool, int, float, np.datetime64, np.timedelta64)):
        raise ValueError(f"it compares with {value!r}, a literal idv's filters do not take")
    return value


def columns_of(node) -> list:
    """The columns a filter names, in first-use order."""
    out = []

    def walk(n):
        if isinstance(n, (Cmp, IsNull)):
            if n.column not in out:
                out.append(n.column)
        elif isinstance(n, (Not, BlocksOnly)):
            walk(n.part)
        else:
            for p in n.parts:
                walk(p)
    walk(node)
    return out
