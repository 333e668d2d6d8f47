"""The watched-process helper of the scale benchmarks, on real child processes."""

import subprocess
import sys
from pathlib import Path

import proc_watch
from proc_watch import watch


def test_a_child_is_timed_and_its_memory_seen():
    code = "b = bytearray(200 * 1024 * 1024); import time; time.sleep(1.0); print('done')"
    done = watch([sys.executable, "-c", code], interval=0.05)
    assert done.returncode == 0 and done.stopped is None and done.stdout == "done\n"
    assert 0.19 < done.peak_rss_gb < 1.0 and done.maxrss_gb > 0.19
    assert done.seconds >= 1.0 and done.cpu_s > 0
    assert "stdout" not in done.summary()


def test_the_kernels_peak_is_the_childs_when_a_small_process_starts_it():
    # ru_maxrss survives execve on Linux: started from this (possibly large) test
    # process, the child could report this process's peak, so a small driver starts it.
    child = "b = bytearray(200 * 1024 * 1024); import time; time.sleep(0.5)"
    driver = (
        f"import sys; sys.path.insert(0, {str(Path(proc_watch.__file__).parent)!r})\n"
        "from proc_watch import watch\n"
        f"print(watch([sys.executable, '-c', {child!r}], interval=0.05).maxrss_gb)"
    )
    out = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, check=True)
    assert 0.19 < float(out.stdout) < 1.0


def test_a_child_past_its_limits_is_killed_and_says_why():
    slow = watch([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert slow.stopped == "timeout" and slow.returncode == -9 and slow.seconds < 10
    code = "b = bytearray(400 * 1024 * 1024); import time; time.sleep(30)"
    big = watch([sys.executable, "-c", code], max_rss_gb=0.2, interval=0.05)
    assert big.stopped == "memory" and big.returncode == -9 and big.peak_rss_gb > 0.2


def test_a_failing_child_keeps_its_message():
    done = watch([sys.executable, "-c", "raise SystemExit('bad input: x')"])
    assert done.returncode == 1 and "bad input: x" in done.stderr_tail
