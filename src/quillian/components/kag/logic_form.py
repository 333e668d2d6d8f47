"""KAG's logical forms (paper Table 1; spec section 4.2) and a tolerant, strict parser.

One parser reads the paper's dialect (``Retrieval``, ``Sort``, ``Math(expr)``,
``Deduce(left=, right=, op=)``, ``Output``, ``x = F(...)``), the v0.5/v0.6 code dialect
(``get_spo``, ``count``, ``sum``, ``sort``, ``compare``, ``get``, ``->alias``) and the
v0.7+ dialect (``Retrieval`` with back-quoted names, ``Math(content=[...],
target=...)``, ``Deduce(op=..., content=[...], target=...)``, ``Output``). It accepts
full-width punctuation, ``StepN: ... ActionN: ...`` on one line, commas and quotes
inside bracketed names and constraint values (``s.location=West Lake, Hangzhou``).

It is strict about meaning: an unknown operator, a missing or repeated ``s``/``p``/``o``,
an unknown key, a Math whose ``content`` lacks its ``=``, an unknown Deduce op, an alias
used before (or by) the step that defines it: each is a :class:`LogicFormError` naming
the problem. One reuse is read, not refused: ``Retrieval(s=o1, p=..., o=o1:Type)`` after
a step that binds ``o1`` reads ``o1`` and binds it anew, as ``o1 = p(o1)`` would.
:func:`parse_plan` records such errors per step; :func:`parse_plan_strict`
raises a :class:`~quillian.components.llm.structured.ParseError` so the planner's task
asks the model once more. :func:`plan_grammar` writes the planner's dialect as a grammar
a local model's decoding is held to.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from quillian.components.llm.structured import ParseError
from quillian.errors import QuillianError

__all__ = [
    "DEDUCE_OPS",
    "PLAN_GRAMMAR_MAX_STEPS",
    "Constraint",
    "DeduceLF",
    "EntityRef",
    "LogicForm",
    "LogicFormError",
    "MathLF",
    "OutputLF",
    "Plan",
    "PlanStep",
    "RelationRef",
    "RetrievalLF",
    "SortLF",
    "first_repeat",
    "own_aliases",
    "parse_logic_form",
    "parse_plan",
    "parse_plan_strict",
    "plan_grammar",
    "repeat_key",
]

DEDUCE_OPS = frozenset(
    {"entailment", "judgement", "greater", "less", "equal", "choice", "multichoice", "extract"}
)
_OPERATORS = {
    "retrieval": "retrieval",
    "get_spo": "retrieval",
    "retriever": "retrieval",
    "sort": "sort",
    "compare": "compare",
    "math": "math",
    "count": "count",
    "sum": "sum",
    "deduce": "deduce",
    "output": "output",
    "get": "output",
}
#: Accepted by the authors' v0.5 parser but without an executor there or here.
_UNSUPPORTED = ("filter", "verify", "extractor", "search_s")
_FULL_WIDTH = str.maketrans(
    {
        "：": ":",
        "（": "(",
        "）": ")",
        "，": ",",
        "＝": "=",
        "［": "[",
        "］": "]",
        "【": "[",
        "】": "]",
        "“": '"',
        "”": '"',
        "‘": "'",
        "’": "'",
        "＞": ">",
        "＜": "<",
        "－": "-",
    }
)
_FORM = re.compile(r"^\s*(?:(\w+)\s*=\s*)?(\w+)\s*\((.*)\)\s*(?:->\s*(\w+))?\s*$", re.DOTALL)
_KEY = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(!=|<=|>=|=|<|>)(.*)$", re.DOTALL)
_ALIAS = re.compile(r"^[A-Za-z_]\w*$")
_ENTITY_START = re.compile(r"^[A-Za-z_]\w*\s*:")
_STEP = re.compile(r"^\s*(?:\*\*)?Step\s*(\d+)\s*(?:\*\*)?\s*:(.*)$", re.IGNORECASE)
_ACTION = re.compile(r"^\s*(?:\*\*)?Action\s*(\d+)\s*(?:\*\*)?\s*:(.*)$", re.IGNORECASE)
_INLINE_ACTION = re.compile(r"\s+(?=(?:\*\*)?Action\s*\d+\s*(?:\*\*)?\s*:)", re.IGNORECASE)


class LogicFormError(QuillianError):
    """A logical form (or a plan) that cannot be read or does not make sense."""


@dataclass(frozen=True)
class EntityRef:
    """``alias:Type1|Type2[name]``; a bare ``alias`` refers to an earlier binding."""

    alias: str
    types: tuple[str, ...] = ()
    name: str = ""

    @property
    def is_reference(self) -> bool:
        return not self.types and not self.name


@dataclass(frozen=True)
class RelationRef:
    alias: str
    types: tuple[str, ...] = ()


@dataclass(frozen=True)
class Constraint:
    """``s.prop=value`` (also ``!=``, ``<``, ``>``, ``<=``, ``>=``) on s, p or o."""

    target: str
    prop: str
    op: str
    value: str


@dataclass(frozen=True)
class RetrievalLF:
    s: EntityRef
    p: RelationRef
    o: EntityRef
    constraints: tuple[Constraint, ...] = ()
    output: str = ""
    operator: str = "retrieval"

    @property
    def rebound(self) -> EntityRef | None:
        """The side that binds anew the alias the other side reads (``o`` in
        ``Retrieval(s=o1, p=..., o=o1:Type)``), or None."""
        if self.s.alias != self.o.alias:
            return None
        return self.o if self.s.is_reference else self.s


@dataclass(frozen=True)
class SortLF:
    """``Sort(set, orderby, direction, limit)``; ``compare(set=[a, b], op=max)`` is a
    sort over several aliases with limit 1."""

    sets: tuple[str, ...]
    orderby: str = ""
    direction: str = "max"
    limit: int = 1
    output: str = ""
    operator: str = "sort"


@dataclass(frozen=True)
class MathLF:
    """An arithmetic ``expression`` over constants and aliases (paper and v0.5
    dialects), or v0.7's ``content`` items and ``target`` question."""

    expression: str = ""
    content: tuple[str, ...] = ()
    target: str = ""
    output: str = ""
    operator: str = "math"


@dataclass(frozen=True)
class DeduceLF:
    ops: tuple[str, ...]
    left: str = ""
    right: str = ""
    content: tuple[str, ...] = ()
    target: str = ""
    output: str = ""
    operator: str = "deduce"


@dataclass(frozen=True)
class OutputLF:
    aliases: tuple[str, ...]
    output: str = ""
    operator: str = "output"


LogicForm = RetrievalLF | SortLF | MathLF | DeduceLF | OutputLF


@dataclass(frozen=True)
class PlanStep:
    """One planned step: its sub-question, the logical form as written and parsed, or
    the error that kept it from parsing."""

    index: int
    question: str
    text: str
    form: LogicForm | None = None
    error: str = ""


@dataclass(frozen=True)
class Plan:
    steps: tuple[PlanStep, ...] = ()
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return bool(self.steps) and not self.errors and all(not s.error for s in self.steps)

    def error_text(self) -> str:
        parts = [*self.errors, *(f"Action{s.index}: {s.error}" for s in self.steps if s.error)]
        return "; ".join(parts)


def normalize(text: str) -> str:
    """Full-width punctuation as ASCII (the v0.5 parser drops this result: spec 10.4)."""
    return text.translate(_FULL_WIDTH)


def _split_args(text: str) -> list[str]:
    """Split on commas outside brackets, parentheses and quotes."""
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "`\"'" and (ch != "'" or _opens_quote(text, i)):
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _opens_quote(text: str, i: int) -> bool:
    """An apostrophe opens a quote only at a value's start (``Mike's`` is a word)."""
    before = text[:i].rstrip()
    return not before or before[-1] in "=,[("


def _pairs(args: str) -> list[tuple[str, str, str]]:
    """``key op value`` pairs; a piece with no key continues the previous value (a
    comma inside an unquoted value). A leading piece without a key is positional."""
    out: list[tuple[str, str, str]] = []
    for piece in _split_args(args):
        match = _KEY.match(piece)
        if match and not _is_quoted(piece):
            out.append((match.group(1), match.group(2), match.group(3).strip()))
        elif out and out[-1][0]:
            key, op, value = out[-1]
            out[-1] = (key, op, f"{value}, {piece}")
        else:
            out.append(("", "", piece))
    return out


def _is_quoted(piece: str) -> bool:
    return piece[:1] in "`\"'"


def unquote(text: str) -> str:
    text = text.strip()
    while len(text) >= 2 and text[0] == text[-1] and text[0] in "`\"'":
        text = text[1:-1].strip()
    return text


def _items(value: str) -> tuple[str, ...]:
    inner = value.strip()
    if inner.startswith("[") and inner.endswith("]"):
        inner = inner[1:-1]
    return tuple(unquote(p) for p in _split_args(inner) if unquote(p))


def _types(text: str) -> tuple[str, ...]:
    parts = re.findall(r"`[^`]*`|[^|]+", text)
    return tuple(t for t in (unquote(p) for p in parts) if t)


def parse_entity(text: str, role: str) -> EntityRef:
    """``alias[:types][[name]]`` (back-quotes and quotes around the name stripped)."""
    raw = text.strip()
    name = ""
    bracket = raw.find("[")
    if bracket >= 0:
        if not raw.endswith("]"):
            raise LogicFormError(f"{role}={raw!r}: unclosed '[' in the entity name")
        name = unquote(raw[bracket + 1 : -1])
        raw = raw[:bracket]
        if "[" in name:  # alias:type[name][ids]: keep the name, drop the ids
            name = unquote(name.split("]", 1)[0])
    alias, _, type_text = raw.partition(":")
    alias = unquote(alias)
    if not _ALIAS.match(alias):
        raise LogicFormError(f"{role}={text.strip()!r}: {alias!r} is not an alias name")
    return EntityRef(alias, _types(type_text), name)


def _relation(text: str) -> RelationRef:
    alias, _, type_text = text.strip().partition(":")
    alias = unquote(alias)
    if not _ALIAS.match(alias):
        raise LogicFormError(f"p={text.strip()!r}: {alias!r} is not an alias name")
    return RelationRef(alias, _types(type_text))


def _retrieval(args: str, output: str, operator: str) -> RetrievalLF:
    spo: dict[str, str] = {}
    constraints: list[Constraint] = []
    for index, (key, op, value) in enumerate(_pairs(args)):
        if not key and index == 0 and _ENTITY_START.match(value):
            key, op = "s", "="  # Retrieval(s1:Type[name], p=..., o=...): the subject first
        if key in ("s", "p", "o"):
            if op != "=":
                raise LogicFormError(f"{key}{op}{value}: s, p and o take '='")
            if key in spo:
                raise LogicFormError(f"{key} is given twice")
            spo[key] = value
        elif re.match(r"^[spo]\.\w+$", key):
            constraints.append(Constraint(key[0], key[2:], op, unquote(value)))
        else:
            shown = f"{key}{op}{value}" if key else value
            raise LogicFormError(f"unexpected argument {shown!r} (expected s=, p=, o=, s.prop=...)")
    missing = [k for k in ("s", "p", "o") if k not in spo]
    if missing:
        raise LogicFormError(f"{operator} needs s, p and o; missing {', '.join(missing)}")
    s, o = parse_entity(spo["s"], "s"), parse_entity(spo["o"], "o")
    # s=o1 with o=o1:Type reads o1 and binds it anew (o1 = p(o1)); checked against the
    # earlier steps by _check_aliases. Both bare or both typed say nothing.
    if s.alias == o.alias and s.is_reference == o.is_reference:
        raise LogicFormError(f"alias {s.alias!r} is both the subject and the object")
    return RetrievalLF(s, _relation(spo["p"]), o, tuple(constraints), output)


def _math(args: str, output: str, operator: str) -> MathLF:
    if operator in ("count", "sum"):
        items = ", ".join(unquote(a) for a in _split_args(args))
        if not items:
            raise LogicFormError(f"{operator}() needs an argument")
        return MathLF(expression=f"{operator}({items})", output=output)
    stripped = args.strip()
    if re.match(r"^content\s*\[", stripped):
        raise LogicFormError("Math: expected content=[...] but found content[...] (missing '=')")
    if re.match(r"^(content|target)\s*=", stripped):
        content: tuple[str, ...] = ()
        target = ""
        for key, op, value in _pairs(stripped):
            if key == "content" and op == "=":
                content = _items(value)
            elif key == "target" and op == "=":
                target = unquote(value)
            else:
                raise LogicFormError(f"Math: unexpected argument {key}{op}{value!r}")
        if not content and not target:
            raise LogicFormError("Math needs content=[...] or target=...")
        return MathLF(content=content, target=target, output=output)
    if not stripped:
        raise LogicFormError("Math() has no expression")
    return MathLF(expression=unquote(stripped), output=output)


def _deduce(args: str, output: str) -> DeduceLF:
    values: dict[str, str] = {}
    for key, op, value in _pairs(args):
        if key not in ("op", "left", "right", "content", "target") or op != "=":
            shown = f"{key}{op}{value}" if key else value
            raise LogicFormError(f"Deduce: unexpected argument {shown!r}")
        values[key] = value
    ops = tuple(o.strip().lower() for o in values.get("op", "").split(",") if o.strip())
    if not ops:
        raise LogicFormError("Deduce needs op= (one of " + ", ".join(sorted(DEDUCE_OPS)) + ")")
    unknown = [o for o in ops if o not in DEDUCE_OPS]
    if unknown:
        raise LogicFormError(
            f"Deduce: unknown op {unknown[0]!r} (one of {', '.join(sorted(DEDUCE_OPS))})"
        )
    content = _items(values["content"]) if "content" in values else ()
    left, right = unquote(values.get("left", "")), unquote(values.get("right", ""))
    if not content and not (left or right):
        raise LogicFormError("Deduce needs left=/right= or content=[...]")
    return DeduceLF(ops, left, right, content, unquote(values.get("target", "")), output)


def _sort(args: str, output: str, operator: str) -> SortLF:
    sets: tuple[str, ...] = ()
    orderby, direction, limit = "", "max", 1
    for key, op, value in _pairs(args):
        if key in ("", "set"):
            sets = _items(value)
        elif key == "orderby":
            orderby = unquote(value)
        elif key in ("direction", "op"):
            direction = unquote(value).lower()
        elif key == "limit":
            try:
                limit = int(unquote(value))
            except ValueError:
                raise LogicFormError(
                    f"{operator}: limit must be a whole number, got {value!r}"
                ) from None
        else:
            raise LogicFormError(f"{operator}: unexpected argument {key}{op}{value!r}")
    if not sets:
        raise LogicFormError(f"{operator} needs a set")
    if direction not in ("min", "max"):
        raise LogicFormError(f"{operator}: direction must be min or max, got {direction!r}")
    if limit < 1:
        raise LogicFormError(f"{operator}: limit must be at least 1")
    bad = [a for a in (*sets, *([orderby] if orderby else [])) if not _ALIAS.match(a)]
    if bad:
        raise LogicFormError(f"{operator}: {bad[0]!r} is not an alias")
    return SortLF(sets, orderby, direction, limit, output)


def _output(args: str, output: str) -> OutputLF:
    aliases = tuple(a for a in (unquote(x.strip("[] ")) for x in _split_args(args)) if a)
    if not aliases:
        raise LogicFormError("Output needs at least one alias")
    bad = [a for a in aliases if not _ALIAS.match(a)]
    if bad:
        raise LogicFormError(f"Output: {bad[0]!r} is not an alias")
    return OutputLF(aliases, output)


def parse_logic_form(text: str) -> LogicForm:
    """One logical form; :class:`LogicFormError` says what is wrong with it."""
    flat = " ".join(normalize(text).split())
    match = _FORM.match(flat)
    if not match:
        raise LogicFormError(f"not a logical form (expected Operator(...)): {flat!r}")
    assigned, name, args, arrow = match.groups()
    if assigned and arrow and assigned != arrow:
        raise LogicFormError(f"two output aliases, {assigned!r} and {arrow!r}")
    output = assigned or arrow or ""
    operator = _OPERATORS.get(name.lower())
    if operator is None:
        if name.lower() in _UNSUPPORTED:
            raise LogicFormError(f"operator {name!r} is not supported (no executor)")
        known = "Retrieval/get_spo, Sort, compare, Math, count, sum, Deduce, Output/get"
        raise LogicFormError(f"unknown operator {name!r} (known: {known})")
    if operator == "retrieval":
        return _retrieval(args, output, name)
    if operator in ("math", "count", "sum"):
        return _math(args, output, operator)
    if operator == "deduce":
        return _deduce(args, output)
    if operator in ("sort", "compare"):
        return _sort(args, output, name)
    return _output(args, output)


def _split_lines(text: str) -> list[str]:
    return [part for line in text.splitlines() for part in _line_parts(line)]


def _line_parts(line: str) -> list[str]:
    """One line of a plan as the parser reads it: full-width punctuation as ASCII, code
    fences as line breaks, an inline ``ActionN:`` on a line of its own, stripped."""
    parts: list[str] = []
    for piece in normalize(line).replace("```", "\n").splitlines():
        parts.extend(_INLINE_ACTION.split(piece))
    return [part.strip() for part in parts if part.strip()]


def parse_plan(text: str) -> Plan:
    """``StepN: sub-question`` / ``ActionN: logical form`` lines (thoughts and other
    lines are skipped). Errors are recorded on their step or on the plan."""
    steps: list[PlanStep] = []
    errors: list[str] = []
    question: str | None = None
    used_question = False
    for line in _split_lines(text):
        step, action = _STEP.match(line), _ACTION.match(line)
        if step:
            if question is not None and not used_question:
                errors.append(f"Step {question!r} has no Action")
            question, used_question = step.group(2).strip(), False
            if not question:
                errors.append(f"Step{step.group(1)} has no sub-question")
        elif action:
            form_text = action.group(2).strip()
            index = len(steps) + 1
            if question is None:
                steps.append(PlanStep(index, "", form_text, error="an Action before any Step"))
                continue
            used_question = True
            try:
                steps.append(PlanStep(index, question, form_text, parse_logic_form(form_text)))
            except LogicFormError as exc:
                steps.append(PlanStep(index, question, form_text, error=str(exc)))
    if question is not None and not used_question:
        errors.append(f"Step {question!r} has no Action")
    if not steps:
        errors.append("no ActionN: lines found")
    return Plan(tuple(_check_aliases(steps)), tuple(errors))


def inputs_of(form: LogicForm) -> list[str]:
    """The aliases a logical form reads (bound by earlier steps)."""
    if isinstance(form, RetrievalLF):
        return [e.alias for e in (form.s, form.o) if e.is_reference]
    if isinstance(form, SortLF):
        return [*form.sets, *([form.orderby] if form.orderby else [])]
    if isinstance(form, MathLF):
        if form.expression:
            unquoted = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", " ", form.expression)
            return re.findall(r"(?<![\w.])([A-Za-z_]\w*)\b(?!\s*\()", unquoted)
        return [c for c in form.content if _ALIAS.match(c)]
    if isinstance(form, OutputLF):
        return list(form.aliases)
    return []


def outputs_of(form: LogicForm) -> list[str]:
    """The aliases a logical form binds."""
    if isinstance(form, RetrievalLF):
        return [form.s.alias, form.p.alias, form.o.alias, *([form.output] if form.output else [])]
    return [form.output] if form.output else []


def own_aliases(form: LogicForm) -> list[str]:
    """The aliases a logical form binds that it does not read: what a step's own
    variables are (``o2`` in ``Retrieval(s=o1, p=p2, o=o2)``, not ``o1``)."""
    read = set(inputs_of(form))
    return [alias for alias in outputs_of(form) if alias not in read]


def repeat_key(step: PlanStep) -> str:
    """What a step asks, whatever its own aliases are named: its sub-question (case
    and spacing aside) and its logical form with each alias it binds replaced by its
    position. Two steps with one key ask the same thing of the same inputs, as a small
    planner's copies of a step do under the plan grammar (``Retrieval(s=o2,
    p=p4:isA, o=o4)`` then ``Retrieval(s=o2, p=p6:isA, o=o6)``)."""
    text = step.text
    if step.form is not None:
        for n, alias in enumerate(own_aliases(step.form)):
            text = re.sub(rf"(?<![\w.]){re.escape(alias)}(?!\w)", f"#{n}", text)
    return " ".join(step.question.lower().split()) + "\n" + text


def first_repeat(text: str, complete: bool = True) -> int | None:
    """Where the plan ``text`` should end: the offset of the line that starts its first
    step repeating an earlier one (:func:`repeat_key`), or None. A small planner that
    repeats a step goes on repeating it (in 48 of the 50 such plans of a HotpotQA run,
    only repeats and an Output came after the first), and a repeat finds nothing new,
    so the plan ends there. Lines are read as :func:`parse_plan` reads them; only a step
    whose action line is finished counts: one ended by a newline, or the last line of a
    ``complete`` reply."""
    seen: set[str] = set()
    question: str | None = None
    start = offset = 0
    lines = text.splitlines(keepends=True)
    for n, raw in enumerate(lines):
        finished = raw.endswith(("\n", "\r")) or (complete and n == len(lines) - 1)
        for part in _line_parts(raw):
            step, action = _STEP.match(part), _ACTION.match(part)
            if step:
                question, start = step.group(2).strip(), offset
            elif action and question is not None and finished:
                form_text = action.group(2).strip()
                try:
                    form: LogicForm | None = parse_logic_form(form_text)
                except LogicFormError:
                    form = None
                key = repeat_key(PlanStep(0, question, form_text, form))
                if key in seen:
                    return start
                seen.add(key)
        offset += len(raw)
    return None


def _check_aliases(steps: list[PlanStep]) -> list[PlanStep]:
    """Every alias a step reads is bound by an earlier step (no cycle, no forward use)."""
    defined_at: dict[str, int] = {}
    for step in steps:
        if step.form is not None:
            for alias in outputs_of(step.form):
                defined_at.setdefault(alias, step.index)
    out: list[PlanStep] = []
    bound: set[str] = set()
    for step in steps:
        if step.form is None:
            out.append(step)
            continue
        error = ""
        form = step.form
        if isinstance(form, RetrievalLF) and form.rebound and form.rebound.alias not in bound:
            error = (
                f"alias {form.s.alias!r} is both the subject and the object, and no earlier "
                "step binds it"
            )
        for alias in [] if error else inputs_of(form):
            if alias in bound:
                continue
            if alias in outputs_of(step.form) and not isinstance(step.form, RetrievalLF):
                error = f"alias {alias!r} is defined by the step that reads it (a cycle)"
            elif alias in defined_at and defined_at[alias] > step.index:
                error = (
                    f"alias {alias!r} is read before step {defined_at[alias]} binds it "
                    "(a cycle or forward reference)"
                )
            elif isinstance(step.form, MathLF | SortLF | OutputLF) or alias not in defined_at:
                if isinstance(step.form, RetrievalLF) and alias not in defined_at:
                    continue  # a bare new alias: an untyped, unnamed variable
                error = f"alias {alias!r} is not bound by any earlier step"
            if error:
                break
        out.append(
            PlanStep(step.index, step.question, step.text, step.form, error) if error else step
        )
        bound.update(outputs_of(step.form))
    return out


def parse_plan_strict(text: str) -> Plan:
    """:func:`parse_plan`, raising :class:`ParseError` (with the raw text) when any
    step or the plan has an error: the planner task then asks again once."""
    plan = parse_plan(text)
    if not plan.ok:
        raise ParseError(plan.error_text(), text, "kag_plan")
    return plan


#: The most steps :func:`plan_grammar` holds a plan to: its states double with each
#: step (which earlier steps were Math), 511 step states at 9.
PLAN_GRAMMAR_MAX_STEPS = 9

#: The terminals of :func:`plan_grammar`. A Math expression is numbers, aliases, the
#: four operations and powers, and the evaluator's functions, so code, or a name that
#: is no alias, cannot be written into it.
_PLAN_TERMINALS = (
    r"NAME: /[^\]\n]{1,80}/",
    r"RELATION: /[A-Za-z][A-Za-z0-9_ ]{0,39}/",
    r"PROPERTY: /[A-Za-z_][A-Za-z0-9_]{0,29}/",
    r"VALUE: /[^,)\n]{1,60}/",
    r'DIRECTION: "min" | "max"',
    r"LIMIT: /[1-9][0-9]?/",
    r"NUMBER: /[0-9]{1,12}(\.[0-9]{1,6})?/",
    r"OP: / ?(\*\*|[-+*\/]) ?/",
    r"COMMA: /, ?/",
    r'FUNCTION: "count" | "sum" | "min" | "max" | "round"',
    r"OPERAND: /[^,()\n]{2,120}|[^,()\nA-Z]/",
    r'DEDUCE_OP: "entailment" | "judgement" | "greater" | "less" | "equal" | "choice"',
    r"QUESTION: /[^\n]{1,200}/",
)
_PLAN_RULES = ('constraint: ", " ("s" | "p" | "o") "." PROPERTY "=" VALUE',)


def plan_grammar(types: Sequence[str], max_steps: int) -> str:
    """The planner's dialect (the paper's Table 1, as the planner's prompt teaches it)
    as a grammar in llguidance's Lark syntax, for
    :attr:`~quillian.components.llm.base.Decoding.grammar`: ``Step1:`` to at most
    ``StepN:`` numbered in order, each followed by its ``ActionN:`` line holding one of
    the five operators with its arguments in the prompt's order, entity types from
    ``types``; an ``Output`` step ends the plan (the planner's tips make Output its own
    step, spec section 4.3, and no step follows it in the paper's plans). A model held
    to it cannot run past ``max_steps`` steps, write markdown or prose around the plan,
    or put a name or code where an alias belongs.

    Aliases follow the paper's plans (Table 14) and the prompt's own: step k binds
    ``sk``, ``pk`` and ``ok`` (a Retrieval, whose object is always new and whose
    subject is new or an earlier alias) or ``mathk`` (a Math), and reads only aliases
    an earlier step of the binding kind wrote, so neither ``Output(math5)`` after a
    Retrieval in step 5 nor ``Retrieval(s=o2, p=p3, o=o2)`` can be written. A
    Deduce reasons over what an earlier step bound: its left operand is an earlier
    alias and its right one an alias or a constant, never the prompt's placeholder
    letters (``Deduce(left=A, right=B, ...)``, which the 0.5B model copied verbatim).
    The grammar tracks which earlier steps were Math (2^(k-1) states at step k, hence
    :data:`PLAN_GRAMMAR_MAX_STEPS`); whether a Retrieval's subject was new, so that
    ``sk`` exists, is still checked by :func:`parse_plan_strict`."""
    if not 1 <= max_steps <= PLAN_GRAMMAR_MAX_STEPS:
        raise ValueError(
            f"max_steps must be between 1 and {PLAN_GRAMMAR_MAX_STEPS}, got {max_steps}"
        )
    if not types:
        raise ValueError("a plan grammar needs at least one entity type")
    rules = ["start: st1_"]
    for k in range(1, max_steps + 1):
        rules.append(f'new_s{k}: "s{k}" (":" TYPE ("[" NAME "]")?)?')
        rules.append(f'new_o{k}: "o{k}" (":" TYPE ("[" NAME "]")?)?')
        for kinds in itertools.product("01", repeat=k - 1):
            rules.extend(_plan_step_rules(k, "".join(kinds), max_steps))
    alternatives = " | ".join(json.dumps(t, ensure_ascii=False) for t in types)
    return "\n".join([*rules, *_PLAN_RULES, f"TYPE: {alternatives}", *_PLAN_TERMINALS]) + "\n"


def _plan_step_rules(k: int, kinds: str, max_steps: int) -> list[str]:
    """The rules of step ``k`` after earlier steps of ``kinds``, one character per
    step: ``1`` a Math (it bound ``mathj``), ``0`` any other (a Retrieval binds ``sj``,
    ``pj`` and ``oj``)."""
    state = f"{k}_{kinds}"
    earlier = [
        alias
        for j, kind in enumerate(kinds, start=1)
        for alias in ([f"math{j}"] if kind == "1" else [f"s{j}", f"p{j}", f"o{j}"])
    ]

    def then(kind: str) -> str:  # the next step, optional, after a step of ``kind``
        return f' ("\\n" st{k + 1}_{kinds}{kind})?' if k < max_steps else ""

    subject = f"(new_s{k} | ref{state})" if earlier else f"new_s{k}"
    actions = [
        f"retrieval{state}{then('0')}",
        f'"math{k} = Math(" expr{state} ")"{then("1")}',
    ]
    term = [
        "NUMBER",
        f'"-" term{state}',
        f'"(" expr{state} ")"',
        f'FUNCTION "(" expr{state} (COMMA expr{state})* ")"',
    ]
    rules = []
    if earlier:
        actions += [f"sort{state}{then('0')}", f"deduce{state}{then('0')}", f"output{state}"]
        term.append(f"ref{state}")
        refs = " | ".join(json.dumps(alias) for alias in earlier)
        rules += [
            f"ref{state}: {refs}",
            f'sort{state}: "Sort(set=" ref{state} ", orderby=" ref{state} '
            '", direction=" DIRECTION ", limit=" LIMIT ")"',
            f'output{state}: "Output(" ref{state} (", " ref{state})* ")"',
            f'deduce{state}: "Deduce(left=" ref{state} ", right=" OPERAND ", op=" DEDUCE_OP ")"',
        ]
    return [
        f'st{state}: "Step{k}: " QUESTION "\\nAction{k}: " ({" | ".join(actions)})',
        f'retrieval{state}: "Retrieval(s=" {subject} ", p=p{k}" (":" RELATION)? '
        f'", o=" new_o{k} constraint* ")"',
        f"expr{state}: term{state} (OP term{state})*",
        f"term{state}: {' | '.join(term)}",
        *rules,
    ]
