"""Stop rules: where a reply has said all it usefully will, named so a decoding can
carry one (:attr:`~quillian.components.llm.base.Decoding.stop`).

A rule reads the reply so far and returns the offset where it should end, or None.
The task runner cuts every reply by its decoding's rule, so a reply means the same
whichever backend wrote it; a backend that can stop decoding early (the local model)
asks the rule as the reply grows and stops at its first answer, saving the tokens the
cut would drop. A rule is told whether the text is the whole reply (``complete``): a
growing reply's last line may still change, so a rule judges only finished lines
until then.
"""

from __future__ import annotations

from collections.abc import Callable

from quillian.errors import ConfigError

__all__ = ["StopRule", "cut_reply", "register_stop", "stop_rule"]

#: ``rule(text, complete)``: the offset where ``text`` should end, or None.
StopRule = Callable[[str, bool], int | None]

_RULES: dict[str, StopRule] = {}


def register_stop(name: str, rule: StopRule) -> None:
    """Make ``rule`` available to decodings as ``name`` (registering one name twice
    with another rule is an error)."""
    if _RULES.get(name, rule) is not rule:
        raise ConfigError(f"stop rule {name!r} is registered already")
    _RULES[name] = rule


def stop_rule(name: str) -> StopRule:
    """The rule registered as ``name``."""
    try:
        return _RULES[name]
    except KeyError:
        known = ", ".join(sorted(_RULES)) or "none"
        raise ConfigError(f"unknown stop rule {name!r}; registered: {known}") from None


def cut_reply(name: str, text: str) -> str:
    """``text`` ended where the rule ``name`` says (whole when it says nothing; no rule
    when ``name`` is empty), trailing whitespace removed from a cut reply."""
    if not name:
        return text
    end = stop_rule(name)(text, True)
    return text if end is None else text[:end].rstrip()
