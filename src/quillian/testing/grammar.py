"""Whether a grammar (``Decoding.grammar``, llguidance's Lark dialect) lets a whole
reply through, with no model: llguidance's byte tokenizer feeds it byte by byte."""

from __future__ import annotations

__all__ = ["grammar_accepts"]


def grammar_accepts(grammar: str, text: str) -> bool:
    """True when ``text`` is a complete reply under ``grammar``; ``ValueError`` when
    the grammar does not compile. Needs llguidance (the extra ``local``)."""
    import llguidance

    tokenizer = llguidance.LLTokenizer("byte")
    matcher = llguidance.LLMatcher(
        tokenizer, llguidance.LLMatcher.grammar_from_lark(grammar), log_level=0
    )
    if matcher.is_error():
        raise ValueError(f"the grammar does not compile: {matcher.get_error()}")
    ids = tokenizer.tokenize_str(text)
    return bool(matcher.try_consume_tokens(ids) == len(ids) and matcher.is_accepting())
