"""KAG: the typed, aligned graph with its mutual index, and the logical-form solver
with reflection (see :mod:`.pipeline`, :mod:`.executors` and :mod:`.stages`)."""

from quillian.methods.kag.pipeline import KAG
from quillian.methods.kag.stages import KAGGraphStage
from quillian.methods.spec import MethodSpec

__all__ = ["SPECS"]

SPECS = (
    MethodSpec(
        "kag",
        KAG,
        "KAG: logical-form planning over the typed graph and chunks, with reflection "
        "(--option preset=LFSH|LFS|CR, rounds=N)",
        "kag",
        needs_schema=True,
        index_stages=(KAGGraphStage(),),
    ),
)
