"""The update benchmark's Markdown rendering of a result: one row per tree, backend
and size, a failed operation named as such."""

from updates import markdown


def _op(library, cli):
    return {
        "library_s_median": library,
        "library_cpu_s_median": library and library / 10,
        "cli_s_median": cli,
        "cli_cpu_s_median": cli / 10,
        "peak_rss_gb_max": 0.5,
    }


def test_each_result_is_a_row_and_a_failure_says_so():
    result = {
        "trees": {"ta": "/trees/today", "tb": "/trees/new"},
        "results": [
            {
                "tree": "ta",
                "backend": "embedded",
                "size": "2k",
                "add": _op(40.0, 80.0),
                "delete": _op(10.0, 50.0),
            },
            {
                "tree": "tb",
                "backend": "postgres",
                "size": "20k",
                "add": _op(None, 90.0),
                "delete": _op(2.0, 30.0),
            },
            {"tree": "tb", "backend": "postgres", "size": "100k"},
        ],
    }
    lines = markdown(result).split("\n")
    assert len(lines) == 5 and lines[0].startswith("| tree | backend | size |")
    assert lines[2] == (
        "| /trees/today | embedded | 2k | 40.0 s / 4.0 CPU s | 80.0 s / 8.0 CPU s "
        "| 10.0 s / 1.0 CPU s | 50.0 s / 5.0 CPU s | 0.50 / 0.50 |"
    )
    assert lines[3].split(" | ")[3] == "failed"
    assert (
        lines[4] == "| /trees/new | postgres | 100k | failed | failed | failed | failed | - / - |"
    )
