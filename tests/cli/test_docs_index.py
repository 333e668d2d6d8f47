"""The docs site's getting-started page shows the README's commands, word for word, so
the commands tests/cli/test_readme.py runs are the ones the site tells a newcomer."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASH = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def bash_lines(path: Path) -> list[str]:
    blocks = BASH.findall(path.read_text(encoding="utf-8"))
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_the_getting_started_commands_are_the_readmes() -> None:
    page = bash_lines(ROOT / "docs" / "index.md")
    readme = set(bash_lines(ROOT / "README.md"))
    assert len(page) == 4
    assert [line for line in page if line not in readme] == []
