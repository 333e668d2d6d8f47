"""The retrieval kernels are compiled by numba at their first call: a process that
only indexes, adds or deletes (the CLI's ``add``, ``delete``, ``index``) never imports
numba, and a kernel called from several threads at once is compiled once."""

import subprocess
import sys
import threading

import numpy as np
import pytest

from quillian.compiled import njit_on_first_call


def test_the_cli_and_the_index_modules_import_no_numba() -> None:
    code = (
        "import sys, quillian.cli.main, quillian.index.build, quillian.components.factories;"
        " import quillian.components.graph.ppr, quillian.stores.embedded.sketch;"
        " print('numba' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "False"


def _total(values: np.ndarray) -> float:  # pragma: no cover - compiled
    out = 0.0
    for v in values:
        out += v
    return out


def test_a_kernel_compiled_at_its_first_call_from_several_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import numba

    compiled: list[object] = []
    real = numba.njit

    def counted(*args: object, **options: object) -> object:
        if not args:  # numba's own modules decorate functions as they load
            compiled.append(options)
        return real(*args, **options)

    monkeypatch.setattr(numba, "njit", counted)
    kernel = njit_on_first_call(cache=False)(_total)
    assert compiled == []
    values = np.arange(1000, dtype=np.float64)
    results: list[float] = []
    threads = [threading.Thread(target=lambda: results.append(kernel(values))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [float(values.sum())] * 4 and compiled == [{"cache": False}]
    assert kernel.__name__ == "_total" and kernel.__wrapped__ is _total
