"""Every command the README shows runs, and prints what the README says it prints; so
does every command of the docs pages on the command line and the service (``PAGES``).

A ```` ```bash ```` block is a runnable example: each ``quillian`` line runs in order
through :func:`quillian.cli.main.main`, in a fresh working directory, with the slow
parts swapped for stand-ins: the local LLM for a scripted model routed by prompt name
(``--llm local`` -> ``--llm scripted:...``), WordNet's MiniLM vectors for the hash
embedder. The real sample index, MiniLM and spreading activation run as the README says.
A ```` ```text ```` block right after a bash block is the output of its last command:
each of its lines must appear in that output, in order, ``...`` standing for text left
out. Setup lines (venv, pip, pytest) are skipped, as are the long-running servers
(``quillian serve``, ``quillian mcp``: tests/server starts them).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from quillian.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The docs pages whose commands run the same way as the README's.
PAGES = (README, ROOT / "docs" / "cli.md", ROOT / "docs" / "service.md")
#: Lines that set up an environment rather than use Quillian.
SETUP = ("python3 -m venv", "pip install", "python -m pytest", "bash .ci/run", ". .venv")
#: Commands that serve until stopped.
SERVERS = ("quillian serve", "quillian mcp")
#: The scripted model's replies, by prompt name (what the README's answers rest on).
ROUTES = {
    "sa-rag.answer": json.dumps(
        {
            "reasoning": "Quillian's doctoral advisor was Herbert A. Simon, born in Milwaukee.",
            "final_answer": "Milwaukee",
        }
    ),
}
WORDNET = Path("/usr/share/wordnet")
#: A bracketed score as re.escape writes it.
SCORE = re.compile(r"\\\[-?[0-9.e+\\-]+\\\]")


@dataclass
class Example:
    """One bash block: its commands, and the output its last command should print."""

    line: int
    commands: list[str]
    expected: list[str] = field(default_factory=list)


def examples(text: str) -> list[Example]:
    """The README's bash blocks, each with the text block that follows it, if any."""
    found: list[Example] = []
    fence = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
    last_end = -1
    for match in fence.finditer(text):
        language, body = match.group(1), match.group(2)
        line = text.count("\n", 0, match.start()) + 1
        if language == "bash":
            commands = [c for c in _commands(body) if c]
            found.append(Example(line, commands))
        elif language == "text" and found and not text[last_end : match.start()].strip():
            found[-1].expected = body.splitlines()
        last_end = match.end()
    return found


def _commands(body: str) -> list[str]:
    """The Quillian commands of a block: ``&&`` chains split, comments and setup dropped."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        for part in line.split("&&"):
            command = part.split("  #", 1)[0].strip()
            if command.startswith(SETUP) or command.startswith(SERVERS):
                continue
            out.append(command)
    return out


def substitute(command: str, routes: Path) -> list[str]:
    """``command`` as arguments for :func:`main`, with the stand-ins."""
    args = shlex.split(command)
    assert args[0] == "quillian", f"not a quillian command: {command}"
    args = args[1:]
    if "--llm" in args:
        at = args.index("--llm") + 1
        if args[at].startswith("local"):
            args[at] = f"scripted:{routes}"
    if args[:3] == ["kg", "import", "wordnet"]:
        args += ["--embedder", "hash"]
    return args


def appears_in_order(expected: list[str], output: str) -> None:
    """Each expected line matches a later output line (``...``: any text)."""
    lines = output.splitlines()
    at = 0
    for want in expected:
        if not want.strip() or want.strip() == "...":
            continue
        parts = [re.escape(p) for p in want.strip().split("...")]
        # a score in brackets may differ in its last digits on another CPU
        parts = [SCORE.sub(r"\\[-?[0-9.e+-]+\\]", p) for p in parts]
        pattern = re.compile(".*".join(parts))
        while at < len(lines) and not pattern.search(lines[at]):
            at += 1
        assert at < len(lines), f"README promises {want!r}; the command printed:\n{output}"
        at += 1


README_EXAMPLES = examples(README.read_text(encoding="utf-8"))
#: The examples with a Quillian command (the rest only set up an environment).
RUNNABLE = [e for e in README_EXAMPLES if e.commands]
#: Those of the README and the docs pages, with the page each comes from.
EVERY = [
    (page, e) for page in PAGES for e in examples(page.read_text(encoding="utf-8")) if e.commands
]


def test_the_readme_has_runnable_examples_with_their_output():
    assert len(RUNNABLE) >= 3
    assert sum(bool(e.expected) for e in RUNNABLE) >= 2
    assert RUNNABLE[0].commands[0] == "quillian index --sample --out indexes/sample"


@pytest.mark.model
@pytest.mark.parametrize(
    ("page", "example"),
    EVERY,
    ids=[f"{page.stem}-line{e.line}" for page, e in EVERY],
)
def test_readme_example(page, example, tmp_path, monkeypatch, capsys):
    if any("wordnet" in c for c in example.commands) and not WORDNET.is_dir():
        pytest.skip("WordNet is not installed (apt-get install wordnet-base)")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("QUILLIAN_LLM_CACHE", str(tmp_path / "llm.sqlite"))
    monkeypatch.setenv("QUILLIAN_EMBEDDING_CACHE", str(tmp_path / "embeddings.sqlite"))
    routes = tmp_path / "routes.json"
    routes.write_text(json.dumps(ROUTES))
    if example.commands and not example.commands[0].startswith("quillian index --sample"):
        assert main(["index", "--sample", "--out", "indexes/sample"]) == 0  # what they read
    output = ""
    for command in example.commands:
        capsys.readouterr()
        code = main(substitute(command, routes))
        output = capsys.readouterr().out
        where = f"{page.name} line {example.line}"
        assert code == 0, f"{where}: {command} exited {code}:\n{output}"
    appears_in_order(example.expected, output)
