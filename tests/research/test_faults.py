"""The crash campaign's script keeps working: one kill per target on the embedded
backend, on a tiny corpus, through the real ``quillian index`` and ``quillian serve``."""

import json
import os

import pytest

from faults import main


@pytest.mark.parametrize("target", ["index", "upload"])
def test_a_kill_then_a_rerun_gives_the_clean_build(target, tmp_path, capsys):
    out = tmp_path / "crash.json"
    argv = ["crash", "--target", target, "--runs", "1", "--documents", "40", "--seed", "3"]
    code = main([*argv, "--json", str(out), "--work", str(tmp_path / "work")])
    report = json.loads(out.read_text())
    part = report[target]
    (run,) = part["runs"]
    assert run["differences"] == [] and run["equal"], run
    assert part["of"] == 1 and code == 0
    assert part["control_differences"] == []  # two clean builds agree in every part
    assert part["clean_counts"]["documents"] == part["clean_counts"]["chunks"] == 40
    assert part["clean_counts"]["edges"] > 0
    if target == "index":
        assert run["rerun_rc"] == 0
    else:
        assert run["job_state"] == "succeeded"
    assert f"embedded  {target:<8}      1   1" in capsys.readouterr().out
    assert not _children(os.getpid())  # every process the campaign started is gone


def _children(pid):
    """Live child processes of ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found
