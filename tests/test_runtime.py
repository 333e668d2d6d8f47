"""The process's allocator as the CLI sets it up: freed memory kept for the next arrays."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from quillian import runtime
from quillian.cli import main as cli_main

#: A child that makes and frees, 8 times, ten arrays of 4 MB alive at once (an
#: update's passes), and prints the minor page faults of the last 7 rounds.
_ROUNDS = """
import resource, sys
import numpy as np
from quillian.runtime import keep_freed_memory
if sys.argv[1] == "kept":
    assert keep_freed_memory()
def round_():
    arrays = [np.ones(1 << 19) for _ in range(10)]
    return sum(float(a[0]) for a in arrays)
round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(7):
    round_()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(kind: str) -> int:
    env = {k: v for k, v in os.environ.items() if k not in runtime.USER_SETTINGS}
    done = subprocess.run(
        [sys.executable, "-c", _ROUNDS, kind], env=env, capture_output=True, text=True, check=True
    )
    return int(done.stdout)


@pytest.mark.skipif(
    not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc only"
)
def test_kept_memory_serves_the_next_arrays_without_faulting_them_in_again() -> None:
    """Arrays of a few megabytes made and freed again and again: as glibc starts, each
    round's are faulted in afresh (about 10k pages); with the memory kept, almost none."""
    kept, system = _faults("kept"), _faults("system")
    assert system > 7 * 5000
    assert kept < system / 10


def test_a_c_library_other_than_glibc_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime.os, "confstr", lambda name: "musl libc 1.2")
    assert runtime.keep_freed_memory() is False

    def unnamed(name: str) -> str:
        raise ValueError(name)

    monkeypatch.setattr(runtime.os, "confstr", unnamed)
    assert runtime.keep_freed_memory() is False


def test_the_cli_keeps_freed_memory_unless_the_user_set_the_allocator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[bool] = []
    monkeypatch.setattr(cli_main, "keep_freed_memory", lambda: calls.append(True) or True)
    for name in runtime.USER_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    assert cli_main.main(["--help"]) == 0
    assert calls == [True]
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert cli_main.main(["--help"]) == 0
    assert calls == [True]
    assert runtime.set_by_user({"GLIBC_TUNABLES": ""})
    assert not runtime.set_by_user({"PATH": "/bin"})
