"""KAG: the typed, aligned graph with its mutual index, and the logical-form solver
with reflection (see :mod:`.pipeline`, :mod:`.executors` and :mod:`.stages`)."""

from quillian.methods.kag.pipeline import KAG, KAGCR, KAGLFS
from quillian.methods.kag.stages import KAGGraphStage
from quillian.methods.spec import MethodSpec

__all__ = ["SPECS"]

#: One stage object shared by the three specs, so an index built for several runs it once.
STAGE = KAGGraphStage()

SPECS = (
    MethodSpec(
        "kag",
        KAG,
        "KAG: logical-form planning over the typed graph and chunks, with reflection "
        "(--option preset=LFSH|LFS|CR, rounds=N, plan_steps=N up to 9)",
        "kag",
        needs_schema=True,
        index_stages=(STAGE,),
    ),
    MethodSpec(
        "kag-lfs",
        KAGLFS,
        "KAG with the LFS preset: graph answers first, chunks when it has none",
        "kag",
        needs_schema=True,
        index_stages=(STAGE,),
    ),
    MethodSpec(
        "kag-cr",
        KAGCR,
        "KAG with the CR preset: PPR+dense chunk retrieval with memory, judge and rewrite",
        "kag",
        needs_schema=True,
        index_stages=(STAGE,),
    ),
)
