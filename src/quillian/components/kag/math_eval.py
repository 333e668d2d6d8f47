"""KAG's Math operator without running model-written code.

The authors' Math executor asks the model for Python and runs it in a subprocess.
Quillian evaluates the logical form's expression itself with a whitelist: numbers,
``+ - * / // % **``, unary signs, parentheses, bound aliases (a number or a set of
numbers), and the calls ``min``, ``max``, ``sum``, ``count``, ``round`` and ``abs``.
Anything else (names not bound, attributes, other calls, subscripts, strings, lambdas,
comprehensions) is refused with :class:`MathError` naming what was found; so are huge
exponents and results, and overlong expressions. ``eval`` is never called: the
expression is parsed with :mod:`ast` and walked here.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence

from quillian.errors import QuillianError

__all__ = ["MathError", "Number", "Value", "as_number", "evaluate", "normalize_expression"]

Number = int | float
Value = Number | list[Number]

MAX_LENGTH = 500
MAX_NODES = 200
MAX_EXPONENT = 64
MAX_MAGNITUDE = 1e100
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")
_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_REWRITES = (
    ("−", "-"),
    ("–", "-"),
    ("×", "*"),
    ("·", "*"),
    ("÷", "/"),
    ("\\times", "*"),
    ("\\cdot", "*"),
    ("\\div", "/"),
    ("^", "**"),
    ("（", "("),
    ("）", ")"),
    ("，", ","),
)


class MathError(QuillianError):
    """An expression that is not whitelisted arithmetic, or that cannot be computed."""

    def __init__(self, expression: str, reason: str) -> None:
        super().__init__(f"Math({expression}): {reason}")
        self.expression = expression
        self.reason = reason


def normalize_expression(text: str) -> str:
    """The paper's notation as Python arithmetic: ``‖A‖`` is ``count(A)``, ``ΣA`` (or
    ``\\sum A``) is ``sum(A)``, ``×``/``÷``/``^`` become ``*``/``/``/``**``."""
    out = text.strip()
    out = re.sub(r"[‖|]{1,2}\s*(\w+)\s*[‖|]{1,2}", r"count(\1)", out)
    out = re.sub(r"(?:Σ|∑|\\sum)\s*(\w+)", r"sum(\1)", out)
    for old, new in _REWRITES:
        out = out.replace(old, new)
    return out


def as_number(value: object) -> Number:
    """A bound value as a number: a number as is; text holding exactly one number
    (``"1971"``, ``"born in 1971"``, ``"1,024"``) as that number."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, int | float):
        return value
    found = _NUMBER.findall(str(value))
    if len(found) != 1:
        raise ValueError(f"{str(value)!r} does not hold exactly one number")
    token = found[0].replace(",", "")
    number = float(token)
    return int(number) if number.is_integer() and "." not in token else number


def _check(expression: str, value: Number) -> Number:
    if (isinstance(value, float) and not math.isfinite(value)) or abs(value) > MAX_MAGNITUDE:
        raise MathError(expression, "the result is too large")
    return value


def _count(values: Sequence[Number]) -> Number:
    return len(values)


def _round(value: Number, digits: Number = 0) -> Number:
    if not isinstance(digits, int) or not 0 <= digits <= 12:
        raise ValueError("round() takes 0 to 12 digits")
    return round(value, digits) if digits else round(value)


_CALLS: dict[str, Callable[..., Number]] = {
    "min": min,
    "max": max,
    "sum": sum,
    "count": _count,
    "round": _round,
    "abs": abs,
}


def evaluate(expression: str, bindings: Mapping[str, Value] | None = None) -> Number:
    """The value of ``expression`` with aliases from ``bindings``; :class:`MathError`
    for anything outside the whitelist or not computable."""
    text = normalize_expression(expression)
    if len(text) > MAX_LENGTH:
        raise MathError(expression[:40] + "...", f"longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise MathError(expression, f"not an arithmetic expression ({exc.msg})") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise MathError(expression, f"more than {MAX_NODES} parts")
    walker = _Walker(expression, bindings or {})
    value = walker.scalar(tree.body)
    return _check(expression, value)


class _Walker:
    def __init__(self, expression: str, bindings: Mapping[str, Value]) -> None:
        self.expression = expression
        self.bindings = bindings

    def fail(self, reason: str) -> MathError:
        return MathError(self.expression, reason)

    def scalar(self, node: ast.expr) -> Number:
        value = self.value(node)
        if isinstance(value, list):
            if len(value) == 1:
                return value[0]
            raise self.fail(f"a set of {len(value)} values where one number is needed")
        return value

    def value(self, node: ast.expr) -> Value:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise self.fail(f"only numbers are allowed, not {node.value!r}")
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in self.bindings:
                raise self.fail(f"unknown name {node.id!r} (not a bound alias)")
            return self.bindings[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.value(node.operand)
            if isinstance(operand, list):
                return [-v for v in operand] if isinstance(node.op, ast.USub) else operand
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.List | ast.Tuple):
            return [self.scalar(e) for e in node.elts]
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.fail(f"{type(node).__name__} is not allowed (only arithmetic)")

    def binary(self, node: ast.BinOp) -> Number:
        left, right = self.scalar(node.left), self.scalar(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT or abs(left) > MAX_MAGNITUDE:
                raise self.fail(f"exponent {right} is too large (at most {MAX_EXPONENT})")
            try:
                result: Number = left**right
            except (OverflowError, ZeroDivisionError) as exc:
                raise self.fail(str(exc)) from None
            if isinstance(result, complex):
                raise self.fail("the power has no real value")
            return _check(self.expression, result)
        op = _BINARY.get(type(node.op))
        if op is None:
            raise self.fail(f"operator {type(node.op).__name__} is not allowed")
        try:
            return _check(self.expression, op(left, right))
        except ZeroDivisionError:
            raise self.fail("division by zero") from None

    def call(self, node: ast.Call) -> Number:
        if not isinstance(node.func, ast.Name) or node.func.id not in _CALLS:
            shown = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise self.fail(f"call to {shown!r} is not allowed (allowed: {', '.join(_CALLS)})")
        if node.keywords:
            raise self.fail(f"{node.func.id}() takes no keyword arguments")
        name = node.func.id
        values: list[Number] = []
        for arg in node.args:
            value = self.value(arg)
            values.extend(value if isinstance(value, list) else [value])
        if name == "round":
            if not 1 <= len(values) <= 2:
                raise self.fail("round() takes one or two numbers")
            try:
                return _round(*values)
            except ValueError as exc:
                raise self.fail(str(exc)) from None
        if name == "abs":
            if len(values) != 1:
                raise self.fail("abs() takes one number")
            return abs(values[0])
        if not values and name in ("min", "max"):
            raise self.fail(f"{name}() of an empty set")
        return _check(self.expression, _CALLS[name](values))
