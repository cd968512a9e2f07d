"""Child processes started by the crawl do not run the parent's main script
(:func:`search.process.spawning`): a crawl started with the ``scrapy`` console script
would otherwise import Scrapy again in each of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import os
import sys
from concurrent.futures import ProcessPoolExecutor
import multiprocessing

with open(os.environ["MARKS"], "a") as marks:  # each run of this script, by name
    marks.write(__name__ + "\\n")

if __name__ == "__main__":
    from search.process import spawning

    def start(executor):
        return executor.submit(os.getpid).result()

    for hidden in (False, True):
        executor = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        if hidden:
            with spawning():
                future = executor.submit(os.getpid)
        else:
            future = executor.submit(os.getpid)
        future.result()
        executor.shutdown()
        with open(os.environ["MARKS"], "a") as marks:
            marks.write(f"-- hidden={hidden}\\n")
    assert __file__.endswith("main.py")  # given back
"""


def test_children_do_not_run_the_main_script(tmp_path: Path) -> None:
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    marks = tmp_path / "marks"
    env = {**os.environ, "MARKS": str(marks), "PYTHONPATH": str(Path(__file__).parents[1])}
    result = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    # Without it, the child ran the script as __mp_main__; within it, not.
    assert marks.read_text().split("\n") == [
        "__main__",
        "__mp_main__",
        "-- hidden=False",
        "-- hidden=True",
        "",
    ]
