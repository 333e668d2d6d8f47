"""Whether a grammar (``Decoding.grammar``, llguidance's Lark dialect) lets a whole
reply through, with no model: llguidance's byte tokenizer feeds it byte by byte, and
each byte must be in the token mask computed before it, as in generation, and the end
of the reply must be too. (Consuming bytes without the masks can pass a reply that
generation could never write: with lexeme negation, llguidance's masks may allow only
the end where the reply cannot end.)"""

from __future__ import annotations

__all__ = ["grammar_accepts"]


def grammar_accepts(grammar: str, text: str) -> bool:
    """True when ``text`` is a complete reply under ``grammar``, byte after byte as
    the masks allow; ``ValueError`` when the grammar does not compile. Needs
    llguidance (the extra ``local``)."""
    import llguidance

    from quillian.components.llm.local import TokenMask

    tokenizer = llguidance.LLTokenizer("byte")
    matcher = llguidance.LLMatcher(
        tokenizer, llguidance.LLMatcher.grammar_from_lark(grammar), log_level=0
    )
    if matcher.is_error():
        raise ValueError(f"the grammar does not compile: {matcher.get_error()}")
    mask = TokenMask(matcher, tokenizer.vocab_size)

    def allowed(token: int) -> bool:
        return bool(mask.allowed()[token])

    for token in tokenizer.tokenize_str(text):
        if not allowed(token) or not matcher.consume_token(token):
            return False
    return allowed(tokenizer.eos_token) and bool(matcher.is_accepting())
