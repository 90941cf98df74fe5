"""Every Python code block of the guides runs as written (on the CPU), in
order within its page, as a reader would paste them. docs/python.md joins
this list with issue 30's first-contact fixes."""
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = ["docs/llama.md"]


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run(page, monkeypatch):
    text = open(os.path.join(ROOT, page)).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, f"{page} has no Python block"
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(ROOT)
    scope = {"__name__": "__docs__"}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{page}, block {i + 1}", "exec"), scope)
        except Exception as e:
            raise AssertionError(f"{page}, Python block {i + 1} fails: {type(e).__name__}: {e}") from e
