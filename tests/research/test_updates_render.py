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


def test_a_served_result_gives_each_round_s_medians_and_their_range():
    def served(adds, deletes):
        runs = [
            {"after_the_first": {"add_s": a, "delete_s": d}, "peak_gb": 0.4}
            for a, d in zip(adds, deletes, strict=True)
        ]
        return {"add": sorted(adds)[1], "delete": sorted(deletes)[1], "runs": runs}

    result = {
        "trees": {"ta": "/trees/today"},
        "results": [
            {
                "tree": "ta",
                "backend": "postgres",
                "size": "20k",
                "served": served([0.3, 0.2, 0.25], [0.1, 0.12, 0.11]),
            },
            {"tree": "ta", "backend": "postgres", "size": "100k", "served": {"runs": [{}]}},
        ],
    }
    lines = markdown(result).split("\n")
    assert lines[0] == "| tree | backend | size | add (rounds) | delete (rounds) | peak GB |"
    assert lines[2] == (
        "| /trees/today | postgres | 20k | 0.25 s (0.20-0.30) | 0.11 s (0.10-0.12) | 0.40 |"
    )
    assert lines[3] == "| /trees/today | postgres | 100k | failed | failed | 0.00 |"


def test_growth_is_the_median_of_each_rounds_own_ratio():
    """Round by round, large over small: a machine twice as slow in the second round
    leaves the ratio as it is (a ratio of the sizes' medians would not)."""
    from update_growth import growth

    def figures(add: float, delete: float) -> dict[str, float]:
        return {"add_s": add, "delete_s": delete, "add_written_mb": 3.0, "delete_written_mb": 2.0}

    taken = [
        {"small": figures(0.1, 0.1), "large": figures(0.15, 0.2)},
        {"small": figures(0.2, 0.2), "large": figures(0.3, 0.4)},
        {"small": figures(0.1, 0.1), "large": figures(0.15, 0.2)},
    ]
    line = growth(taken)
    assert "add 0.100 -> 0.150 s, 1.50x (rounds 1.50-1.50, 95% 1.50-1.50)" in line
    assert "delete 0.100 -> 0.200 s, 2.00x (rounds 2.00-2.00" in line
    assert "3.0 MB written at the large size" in line
