"""``ask --trace``: every step type rendered by its type, as readable lines."""

from dataclasses import dataclass
from typing import ClassVar

from quillian.cli.steps import step_lines
from quillian.methods import steps as st

EXAMPLES = {
    st.Retrieval("q", "dense", ("c1", "c2")): ["retrieved 2 passages for 'q' (dense)"],
    st.Note("Babbage was\n born in London."): ["note: Babbage was born in London."],
    st.ExpandedQuery("Babbage birthplace"): ["expanded query: Babbage birthplace"],
    st.AnswerReasoning("because"): ["answer reasoning: because"],
    st.EnhancedNote("more"): ["enhanced note: more"],
    st.KGSummary("sum"): ["kg summary: sum"],
    st.SubQuestion("Who?", "Babbage"): ["sub-question: Who? -> Babbage"],
    st.FollowUp("Where?", "London"): ["follow-up: Where? -> London"],
    st.KGSeeds("q", (st.KGSeed("A", 0.5), st.KGSeed("B", 0.25))): ["kg seeds: A (0.50), B (0.25)"],
    st.Reasoning("ctx", True, "London", ""): ["reasoning: answerable: London", "  from: ctx"],
    st.Reasoning("ctx", False, "", "Who?"): ["reasoning: needs more: Who?", "  from: ctx"],
    st.KGRound(1, ("A", "B"), 12, ("<A | r | B>",), ("C",), ("<X | y | Z>",), 2): [
        "kg round 1: A, B (12 candidate triples)",
        "  selected <A | r | B>",
        "  unmatched <X | y | Z>",
        "  2 selected again",
        "  next: C",
    ],
    st.KAGPlan(
        1, "Who?", (("Who composed it?", "Retrieval(s=s1:Work[X], p=p1:composer, o=o1)"),)
    ): [
        "kag plan, round 1: Who?",
        "  Who composed it? :: Retrieval(s=s1:Work[X], p=p1:composer, o=o1)",
    ],
    st.KAGTally(4, 3, 1, 2): [
        "kag: 1 of 3 retrieval steps answered from the graph, 2 matched it (4 steps run)"
    ],
    st.KAGStep(
        1,
        2,
        "How old?",
        "m = Math(2027-o3)",
        "math",
        "failed",
        (),
        "I don't know",
        False,
        "alias 'o3' holds no value",
    ): [
        "step 1.2 [math, failed]: m = Math(2027-o3)",
        "  How old? -> I don't know",
        "  error: alias 'o3' holds no value",
    ],
    st.KAGReflection(1, "memory", False, "Where?"): [
        "kag round 1: memory does not answer",
        "  next query: Where?",
    ],
    st.KAGReflection(2, "memory", False, "", "the rewrite gave no question"): [
        "kag round 2: memory does not answer",
        "  no further round: the rewrite gave no question",
    ],
}
#: Steps holding dicts (unhashable), as (step, lines) pairs.
CHECKED = (
    {"triple": ["A", "r", "B"], "linked": "<A | r | B>", "score": 0.5, "note": ""},
    {"triple": ["A", "r", "X"], "linked": "", "score": None, "note": "no KG entity"},
)
CANDIDATES = (
    {
        "source": "m",
        "query": "kg",
        "text": "t",
        "relevant": True,
        "score": 1.0,
        "kept": True,
        "triples": (),
    },
    {
        "source": "m",
        "query": "raw",
        "text": "u",
        "relevant": False,
        "score": None,
        "kept": False,
        "triples": (),
    },
)
MORE = [
    (st.TurnAnswer(1, "London", "why", 2), ["turn 1 answer (2 references): London"]),
    (
        st.ConfidenceCheck(0, 0.5, 34.4, True, CHECKED),
        [
            "kge check, turn 0: score 0.5 vs threshold 34.4: accepted",
            "  (A | r | B) as <A | r | B>: 0.5",
            "  (A | r | X) as no KG entity: -",
        ],
    ),
    (
        st.ConfidenceCheck(
            1,
            None,
            64.0,
            False,
            (
                {
                    "triple": ["A", "r", "X"],
                    "linked": "",
                    "subject_link": {"text": "A", "how": "alias", "entities": [0], "score": None},
                    "object_link": None,
                    "relation_match": "",
                    "score": None,
                    "note": "no KG entity for 'X'",
                },
                {
                    "triple": ["A", "r", "B"],
                    "linked": "<A | r | B>",
                    "subject_link": {"text": "A", "how": "name", "entities": [0], "score": None},
                    "object_link": {
                        "text": "B",
                        "how": "description",
                        "entities": [1],
                        "score": 0.71234,
                    },
                    "relation_match": "alias",
                    "score": 2.0,
                    "note": "",
                },
            ),
            dropped=("generic or pronoun 'he': he born in X.",),
            parse_notes=("not a JSON list: read 2 loose {...} object(s)",),
        ),
        [
            "kge check, turn 1: score unscorable vs threshold 64: not accepted",
            "  (A | r | X) as no KG entity for 'X': -",
            "    linked: subject by alias, object by nothing",
            "  (A | r | B) as <A | r | B>: 2",
            "    linked: subject by name, object by description 0.712, predicate by alias",
            "  dropped: generic or pronoun 'he': he born in X.",
            "  parse: not a JSON list: read 2 loose {...} object(s)",
        ],
    ),
    (
        st.RelatedEntities("q", ("A (question)",), ("A r B.",)),
        ["related entities for 'q': A (question)", "  fact: A r B."],
    ),
    (
        st.ReferenceFilter(0, "q", CANDIDATES, 1),
        [
            "references, turn 0: kept 1 of 2 for 'q'",
            "  [kept, score 1] m (kg): t",
            "  [irrelevant, score -] m (raw): u",
        ],
    ),
]


def test_every_step_kind_has_its_own_lines():
    pairs = [*EXAMPLES.items(), *MORE]
    assert {type(step) for step, _ in pairs} == set(st.STEP_KINDS.values())
    for step, lines in pairs:
        assert step_lines(step) == lines


def test_a_long_reasoning_context_is_cut():
    (_, context) = step_lines(st.Reasoning("word " * 200, True, "x", ""))
    assert len(context) < 320 and context.endswith("...")


def test_an_unknown_step_type_shows_its_kind_and_fields():
    @dataclass(frozen=True)
    class Custom(st.Step):
        kind: ClassVar[str] = "custom"
        value: int

    assert step_lines(Custom(3)) == ["custom: value 3"]
