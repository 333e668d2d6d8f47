"""KAGS: triples that keep their source sentence, metadata filtration and h-hop
traversal (see :mod:`.pipeline`); its build stage stores the 4-tuples (:mod:`.stage`)."""

from quillian.methods.kags.pipeline import KAGS
from quillian.methods.kags.stage import KAGSStage
from quillian.methods.spec import MethodSpec

__all__ = ["SPECS"]

SPECS = (
    MethodSpec(
        "kags",
        KAGS,
        "top-k triples filtered by their source sentences, h-hop traversal, answer from "
        "relations grouped by hop",
        "kags",
        index_stages=(KAGSStage(),),
    ),
)
