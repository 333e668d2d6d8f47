# Logical forms are quoted verbatim from the spec: long lines stay.
# ruff: noqa: E501
"""Every logical form the KAG spec quotes (sections 4.3 and 4.7, T1 to T9) either parses
to the expected form or fails with a clear error; plans pair steps with actions and
check alias binding."""

from __future__ import annotations

import pytest

from quillian.components.kag.logic_form import (
    PLAN_GRAMMAR_MAX_STEPS,
    DeduceLF,
    LogicFormError,
    MathLF,
    OutputLF,
    RetrievalLF,
    SortLF,
    first_repeat,
    own_aliases,
    parse_logic_form,
    parse_plan,
    parse_plan_strict,
    plan_grammar,
    repeat_key,
)
from quillian.components.kag.schema import default_schema
from quillian.components.llm.structured import ParseError
from quillian.components.prompts.kag import PLAN
from quillian.testing.grammar import grammar_accepts

PARSES = [
    # section 4.3, v0.5/v0.6 English cases
    (
        "get_spo(s=s1:Player[Cristiano Ronaldo],p=p1:PlayedForIn2011Year,o=o1:SportsTeam)",
        RetrievalLF,
    ),
    ("get_spo(s=o1,p=p2:FoundationYear,o=o2:Year)", RetrievalLF),
    ("sort(set=o1, orderby=o2, direction=max, limit=1)", SortLF),
    ("get_spo(s=s1:HistoricalSite[Pocahontas Mounds], p=p1:LocatedIn, o=o1:State)", RetrievalLF),
    ("get_spo(s=o1, p=p2:YearOfBecamingPartofTheUnitedStates, o=o2:Date)", RetrievalLF),
    ("compare(set=[o3,o4], op=max)", SortLF),
    ("get_spo(s=s1:公众人物[吴京], p=p1, o=o1)", RetrievalLF),
    ("get(s1)", OutputLF),
    ("sum(30,6)->sum1", MathLF),
    ("sum(2024,-o3)->sum4", MathLF),
    ("sum(sum1,sum4)->sum5", MathLF),
    ("get(sum5)", OutputLF),
    ("count_alias=count(alias)", MathLF),  # the zh prompt's form, unreadable by v0.5
    # section 4.3, v0.7+ cases
    (
        "Retrieval(s=s1:Player[`Cristiano Ronaldo`],p=p1:PlayedForIn2011Year,o=o1:SportsTeam)",
        RetrievalLF,
    ),
    ("Retrieval(s=o1,p=p2:FoundationYear,o=o2:Year)", RetrievalLF),
    ("Math(content=[`o2`], target=`Which team was founded last?`)->math3", MathLF),
    (
        "Deduce(op=entailment,content=[`John is Mike's father`, `James is John's father`],"
        "target=`What is the relationship between James and Mike?`)->res",
        DeduceLF,
    ),
    ("output(res)", OutputLF),
    (
        "Retrieval(s=s1:Journal[`Journal of Psychotherapy Integration`],p=p1:Publish,o=o1:Association)",
        RetrievalLF,
    ),
    ("Retrieval(s=o1,p=p2:FirstPresident,o=o2:Person)", RetrievalLF),
    ("Math(content=[`o1`,`o2`], target=`Which was released first?`)->math5", MathLF),
    # T1 (Table 13)
    ("Retrieval(s=s1:Work[C Major Op 3 6],p=p1:composer,o=o1:Person)", RetrievalLF),
    ("Retrieval(s=o1,p=p2:brithPlace,o=o2:Place)", RetrievalLF),
    ("Retrieval(s=o2,p=p3:plagueOccurrence,o=o3:Plague)", RetrievalLF),
    ("Count(o3)->nums", MathLF),
    ("Retrieval(s=s1:City[Venice],p=p3:plagueOccurrencesInMid14thCentury,o=o1:Times)", RetrievalLF),
    # T2
    (
        "Retrieval(s=s1:Player[Cristiano Ronaldo], p=p1:playedFor, o=o1:SportsTeam, p.PlayedForInYear=2011)",
        RetrievalLF,
    ),
    ("Retrieval(s=o1, p=p2:foundationYear, o=o2:Year)", RetrievalLF),
    ("Sort(set=o1, orderby=o2, direction=max, limit=1)", SortLF),
    # T3
    ("math1 = Math(30+6)", MathLF),
    ("Retrieval(s=s2:Company[Tesla], p=p2:founder, o=o2)", RetrievalLF),
    ("Retrieval(s=o2, p=p3:yearOfBirth, o=o3)", RetrievalLF),
    ("math4 = Math(2027-o3)", MathLF),
    ("math5 = Math(math1+math4)", MathLF),
    # T4, T5
    ("Retrieval(s=s1:Image, p=p2:contains, o=o1:Vegetables)", RetrievalLF),
    ("Retrieval(s=s2:Image, p=p2:contains, o=o2:Fruits)", RetrievalLF),
    ("Output(s1, s2)", OutputLF),
    ("Retrieval(s=s1, p=p2:contains, o=o2:Fruits)", RetrievalLF),
    ("Output(s1)", OutputLF),
    # T6, T7
    ("Retrieval(s=s1:Event[apply for a passport], p=p1:support_chunks, o=o1:Chunk)", RetrievalLF),
    ("Deduce(left=o1, right=the original identity card, op=entailment)", DeduceLF),
    (
        "Retrieval(s=s1:Event[applying for a disability certificate], p=p1:support_chunks, "
        "o=o1:Chunk, s.location=West Lake, Hangzhou)",
        RetrievalLF,
    ),
    # a subject written without its "s=" (small models do this)
    ("Retrieval(s1:County[Johnnycake], p=p1:locatedIn, o=o1:County)", RetrievalLF),
    # full-width punctuation
    ("Retrieval（s=s1:Person[Ada]，p=p1:bornIn，o=o1:Place）", RetrievalLF),
]

FAILS = [
    (
        "Journal(s=s1:Player[Psychotherapy Integration],p=p1:Publish,o=o1:Association)",
        "unknown operator 'Journal'",
    ),
    ("Math(content[`o3`,`o4`], target=`Which one happened later?`)->math5", "missing '='"),
    ("Retrieval(s=s1:Person[Ada], p=p1:bornIn)", "missing o"),
    ("Retrieval(s=s1:Person[Ada], s=s2, p=p1, o=o1)", "s is given twice"),
    ("Retrieval(s=s1:Person[Ada], p=p1, o=o1, colour=red)", "unexpected argument 'colour=red'"),
    ("Retrieval(s=o1, p=p1, o=o1)", "both the subject and the object"),
    ("Deduce(op=guess, content=[`a`], target=`b`)", "unknown op 'guess'"),
    ("Deduce(content=[`a`], target=`b`)", "needs op="),
    ("Sort(set=o1, direction=sideways)", "direction must be min or max"),
    ("filter(left_expr=a, right_expr=b, op=equal)", "not supported"),
    ("Output()", "at least one alias"),
    ("just some words", "not a logical form"),
    ("Retrieval(s=s1:Person[Ada, p=p1, o=o1)", "missing p, o"),
    ("x = Math(1)->y", "two output aliases"),
]


@pytest.mark.parametrize(("text", "kind"), PARSES)
def test_quoted_logical_forms_parse(text: str, kind: type) -> None:
    assert isinstance(parse_logic_form(text), kind)


@pytest.mark.parametrize(("text", "message"), FAILS)
def test_broken_logical_forms_fail_clearly(text: str, message: str) -> None:
    with pytest.raises(LogicFormError) as err:
        parse_logic_form(text)
    assert message in str(err.value)


def test_retrieval_fields() -> None:
    form = parse_logic_form(
        "Retrieval(s=s1:`Work|Song`[`Concerto, in C`], p=p1:composer, o=o1:Person, "
        "p.year>=1700, s.location=`West Lake, Hangzhou`)"
    )
    assert isinstance(form, RetrievalLF)
    assert form.s.types == ("Work|Song",) and form.s.name == "Concerto, in C"
    assert [(c.target, c.prop, c.op, c.value) for c in form.constraints] == [
        ("p", "year", ">=", "1700"),
        ("s", "location", "=", "West Lake, Hangzhou"),
    ]
    t7 = parse_logic_form(
        "Retrieval(s=s1:Event[x], p=p1:support_chunks, o=o1:Chunk, s.location=West Lake, Hangzhou)"
    )
    assert isinstance(t7, RetrievalLF) and t7.constraints[0].value == "West Lake, Hangzhou"


def test_math_and_deduce_fields() -> None:
    count = parse_logic_form("Count(o3)->nums")
    assert isinstance(count, MathLF) and (count.expression, count.output) == ("count(o3)", "nums")
    v07 = parse_logic_form("Math(content=[`o1`,`o2`], target=`Which first?`)->math5")
    assert isinstance(v07, MathLF) and v07.content == ("o1", "o2") and v07.target == "Which first?"
    deduce = parse_logic_form("Deduce(left=o1, right=the original identity card, op=entailment)")
    assert isinstance(deduce, DeduceLF)
    assert (deduce.left, deduce.right, deduce.ops) == (
        "o1",
        "the original identity card",
        ("entailment",),
    )


def test_plan_dialects_thoughts_and_one_line_steps() -> None:
    text = (
        "First find the composer, then the birthplace.\n"
        "```\nStep1：Who is the composer? Action1：Retrieval(s=s1:Work[C Major Op 3 6],"
        "p=p1:composer,o=o1:Person)\n"
        "Step2: Where was he born?\nAction2: get_spo(s=o1, p=p2:birthPlace, o=o2:Place)\n"
        "Step3: Output\nAction3: get(o2)\n```"
    )
    plan = parse_plan(text)
    assert plan.ok
    assert [s.question for s in plan.steps] == [
        "Who is the composer?",
        "Where was he born?",
        "Output",
    ]
    assert [type(s.form) for s in plan.steps] == [RetrievalLF, RetrievalLF, OutputLF]


def test_plan_errors_are_recorded_per_step_and_strict_raises() -> None:
    text = (
        "Step1: a\nAction1: Journal(s=s1:X[y], p=p1, o=o1)\n"
        "Step2: b\nAction2: math2 = Math(math2 + 1)\n"
        "Step3: c\nAction3: Output(o9)\n"
        "Step4: d\nAction4: x = Math(y + 1)\nStep5: e\nAction5: y = Math(2)\n"
        "Step6: dangling"
    )
    plan = parse_plan(text)
    errors = [s.error for s in plan.steps]
    assert "unknown operator 'Journal'" in errors[0]
    assert "a cycle" in errors[1]
    assert "not bound by any earlier step" in errors[2]
    assert "read before step 5 binds it" in errors[3]
    assert errors[4] == ""
    assert plan.errors == ("Step 'dangling' has no Action",)
    with pytest.raises(ParseError) as err:
        parse_plan_strict(text)
    assert "Journal" in str(err.value) and err.value.raw == text


def test_plan_without_actions() -> None:
    plan = parse_plan("I think the answer is 42.")
    assert not plan.ok and plan.errors == ("no ActionN: lines found",)


def test_reused_alias_across_steps_is_tolerated() -> None:
    plan = parse_plan(
        "Step1: veg\nAction1: Retrieval(s=s1:Image, p=p2:contains, o=o1:Vegetables)\n"
        "Step2: fruit\nAction2: Retrieval(s=s2:Image, p=p2:contains, o=o2:Fruits)\n"
        "Step3: out\nAction3: Output(s1, s2)"
    )
    assert plan.ok


def test_a_step_may_read_an_alias_and_bind_it_again() -> None:
    """``Retrieval(s=o1, p=p2:era, o=o1:Date)``: the subject reads o1 as an earlier step
    bound it, and the typed object binds o1 anew (``o1 = era(o1)``), the reading the
    0.5B planner means in most of its steps. With no earlier step binding o1 it is a
    cycle; with both sides bare or both typed it says nothing."""
    plan = parse_plan(
        "Step1: who\nAction1: Retrieval(s=s1:Person[Haymo of Faversham], p=p1:is, o=o1:Person)\n"
        "Step2: era\nAction2: Retrieval(s=o1, p=p2:era, o=o1:Date)\n"
        "Step3: out\nAction3: Output(o1)"
    )
    assert plan.ok, plan.error_text()
    form = plan.steps[1].form
    assert isinstance(form, RetrievalLF) and form.o.types == ("Date",)
    cycle = parse_plan("Step1: era\nAction1: Retrieval(s=o1, p=p2:era, o=o1:Date)")
    assert "is both the subject and the object, and no earlier step binds it" in (
        cycle.steps[0].error
    )
    with pytest.raises(LogicFormError, match="both the subject and the object"):
        parse_logic_form("Retrieval(s=o1:Person, p=p1, o=o1:Date)")


def test_math_inputs_exclude_function_names() -> None:
    plan = parse_plan(
        "Step1: a\nAction1: Retrieval(s=s1:X[y], p=p1:r, o=o3)\n"
        "Step2: count\nAction2: Count(o3)->nums\nStep3: sum\nAction3: total = Math(sum(o3) + nums)"
    )
    assert plan.ok, plan.error_text()


def held(text: str, max_steps: int = 8) -> bool:
    """Whether :func:`plan_grammar` (the default schema's types) lets ``text`` through."""
    pytest.importorskip("llguidance")
    return grammar_accepts(plan_grammar(default_schema().entity_types, max_steps), text)


ONE_STEP = (
    "Step1: Who directed it?\nAction1: Retrieval(s=s1:Works[Alien], p=p1:director, o=o1:Person)"
)


def test_the_plan_grammar_holds_the_prompts_own_plan_and_every_operator() -> None:
    shot = PLAN.messages[2].content  # the few-shot plan the planner is shown
    assert held(shot) and parse_plan_strict(shot).ok
    plan = (
        ONE_STEP + "\nStep2: When was he born?\nAction2: Retrieval(s=o1, p=p2:birth date, "
        "o=o2:Date, o.year=1939)\nStep3: The earliest?\nAction3: Sort(set=o1, orderby=o2, "
        "direction=min, limit=1)\nStep4: Older than 80?\nAction4: Deduce(left=o2, right=1939, "
        "op=greater)\nStep5: His age?\nAction5: math5 = Math(round(2027 - o2))\n"
        "Step6: Answer.\nAction6: Output(o1, math5)"
    )
    assert held(plan) and parse_plan_strict(plan).ok


def test_the_plan_grammar_holds_the_papers_own_plans() -> None:
    """The paper's Table 14 numerical plans, written as the planner's prompt asks (an
    edge-property constraint on p, an alias read as subject, untyped objects, Math
    over aliases and constants), under the types they use."""
    grammar = plan_grammar(["Player", "SportsTeam", "Year", "Company"], 8)
    ronaldo = (
        "Step1: Identify the Sports Teams Cristiano Ronaldo Played for in 2011.\nAction1: "
        "Retrieval(s=s1:Player[Cristiano Ronaldo], p=p1:playedFor, o=o1:SportsTeam, "
        "p.PlayedForInYear=2011)\nStep2: Determine the Foundation Years of Each Identified "
        "Team.\nAction2: Retrieval(s=o1, p=p2:foundationYear, o=o2:Year)\nStep3: Which team "
        "was founded last?\nAction3: Sort(set=o1, orderby=o2, direction=max, limit=1)"
    )
    tesla = (
        "Step1: What is the sum of 30 + 6 ?\nAction1: math1 = Math(30+6)\nStep2: Who is the "
        "founder of Tesla?\nAction2: Retrieval(s=s2:Company[Tesla], p=p2:founder, o=o2)\n"
        "Step3: In which year was the founder of Tesla born?\nAction3: Retrieval(s=o2, "
        "p=p3:yearOfBirth, o=o3)\nStep4: How old will the founder of Tesla be in the year "
        "2027?\nAction4: math4 = Math(2027-o3)\nStep5: What is the sum of math1 and math4?"
        "\nAction5: math5 = Math(math1+math4)"
    )
    for plan in (ronaldo, tesla):
        assert grammar_accepts(grammar, plan) and parse_plan_strict(plan).ok


@pytest.mark.parametrize(
    "text",
    [
        "Step1: Who?\nAction1: Retrieval(s=Gallu, p=p1:king, o=o1:Person)",  # a name as alias
        "Step1: Who?\nAction1: Output(true)",  # a literal as alias
        "Step1: Who?\nAction1: Retrieval(s=s1:Spaceship[X], p=p1:r, o=o1)",  # no such type
        "**Step1:** Who?\nAction1: Output(o1)",  # markdown
        "Step2: Who?\nAction2: Output(o1)",  # out of order
        ONE_STEP + "\nThat is the plan.",  # prose after it
        "Step1: Who?\nAction1: Filter(o1)",  # no such operator
        "Step1: Who?",  # a step with no action
        "Step1: Who?\nAction1: Output(o1)",  # nothing bound yet
        ONE_STEP + "\nStep2: Sum?\nAction2: Output(math1)",  # step 1 bound no math1
        ONE_STEP + "\nStep2: Age?\nAction2: Retrieval(s=o1, p=p2:age, o=o1:Date)",  # o1 anew
        ONE_STEP + "\nStep2: Who?\nAction2: Retrieval(s=s1:Person[X], p=p2:r, o=o2)",  # s1 anew
        ONE_STEP + "\nStep2: Age?\nAction2: Retrieval(s=o1, p=p2:age, o=o1)",  # o1 twice
        ONE_STEP + "\nStep2: Same?\nAction2: Retrieval(s=o1, p=p2:is, o=s1)",  # object read
        ONE_STEP + "\nStep2: Age?\nAction2: age = Math(2027-o1)",  # not math2
        ONE_STEP + "\nStep2: Age?\nAction2: math2 = Math(__import__('os'))",  # code
        ONE_STEP + "\nStep2: Age?\nAction2: math2 = Math(2027-o3)",  # no step 3 yet
        ONE_STEP + "\nStep2: Out\nAction2: Output(o1)\nStep3: More?\nAction3: Output(s1)",
        # Deduce: the prompt's placeholders, a name as left operand, nothing bound yet
        ONE_STEP + "\nStep2: Same?\nAction2: Deduce(left=A, right=B, op=entailment)",
        ONE_STEP + "\nStep2: Same?\nAction2: Deduce(left=o1, right=B, op=equal)",
        ONE_STEP + "\nStep2: Same?\nAction2: Deduce(left=Nantong, right=o1, op=equal)",
        "Step1: Bigger?\nAction1: Deduce(left=Nantong, right=Jingdezhen, op=greater)",
    ],
)
def test_the_plan_grammar_refuses_what_the_planner_was_not_asked_for(text: str) -> None:
    assert not held(text)


def test_a_deduce_reads_an_earlier_alias_against_an_alias_or_a_constant() -> None:
    for right in ("o1", "s1", "9", "the original identity card", "Ridley Scott"):
        deduce = f"\nStep2: Is it?\nAction2: Deduce(left=o1, right={right}, op=entailment)"
        assert held(ONE_STEP + deduce), right
        assert parse_plan_strict(ONE_STEP + deduce).ok


def test_the_plan_grammar_stops_at_its_step_limit() -> None:
    steps = [
        f"Step{n}: Q{n}?\nAction{n}: Retrieval(s=s{n}:Person[P{n}], p=p{n}:r, o=o{n})"
        for n in range(1, 4)
    ]
    assert held("\n".join(steps[:2]), max_steps=2)
    assert not held("\n".join(steps), max_steps=2)
    with pytest.raises(ValueError, match="max_steps"):
        plan_grammar(["Person"], 0)
    with pytest.raises(ValueError, match="max_steps"):
        plan_grammar(["Person"], PLAN_GRAMMAR_MAX_STEPS + 1)
    with pytest.raises(ValueError, match="entity type"):
        plan_grammar([], 3)


def test_a_repeat_is_the_same_question_and_form_whatever_its_own_aliases() -> None:
    plan = parse_plan(
        "Step1: Who?\nAction1: Retrieval(s=s1:Person[Ada], p=p1:child, o=o1:Person)\n"
        "Step2: Born?\nAction2: Retrieval(s=o1, p=p2:born, o=o2:Date)\n"
        "Step3:  born? \nAction3: Retrieval(s=o1, p=p3:born, o=o3:Date)\n"
        "Step4: Born?\nAction4: Retrieval(s=s1, p=p4:born, o=o4:Date)\n"
        "Step5: Age?\nAction5: math5 = Math(2027-o2)\nStep6: Age?\nAction6: math6 = Math(2027-o3)"
    )
    keys = [repeat_key(step) for step in plan.steps]
    assert keys[1] == keys[2]  # o3 and p3 are step 3's own: the same as step 2
    assert keys[3] != keys[1]  # reads s1, not o1
    assert keys[4] != keys[5]  # reads o2 and o3: different inputs
    assert own_aliases(plan.steps[1].form) == ["p2", "o2"]


def test_a_plan_ends_before_its_first_step_that_repeats_an_earlier_one() -> None:
    """A small planner's loop: step 3 is step 2 with its own aliases renumbered. The
    plan ends where step 3's line starts; a growing reply's last action line counts
    only once a newline ends it; full-width punctuation and one-line steps are read as
    the parser reads them."""
    steps = [
        "Step1: Who directed Alien?\nAction1: Retrieval(s=s1:Work[Alien], p=p1:director, o=o1:Person)\n",
        "Step2: His mother?\nAction2: Retrieval(s=o1, p=p2:mother, o=o2:Person)\n",
        "Step3: his  mother? \nAction3: Retrieval(s=o1, p=p3:mother, o=o3:Person)\n",
        "Step4: Output.\nAction4: Output(o3)",
    ]
    text = "".join(steps)
    end = len(steps[0]) + len(steps[1])
    assert first_repeat(text) == end
    assert first_repeat(text[: end + len(steps[2]) - 1], complete=False) is None  # line open
    assert first_repeat(text[: end + len(steps[2])], complete=False) == end
    assert first_repeat(text[: end + len(steps[2]) - 1], complete=True) == end
    assert first_repeat("".join([steps[0], steps[1], steps[3]])) is None
    one_line = steps[1].replace("\n", " ", 1).replace("(", "（", 1)
    assert first_repeat(steps[0] + one_line + one_line.replace("p2", "p3").replace("o2", "o3")) == (
        len(steps[0]) + len(one_line)
    )
    reads_other = steps[2].replace("s=o1", "s=s1")  # another input: not a repeat
    assert first_repeat(steps[0] + steps[1] + reads_other) is None
