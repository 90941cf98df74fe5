"""Every Python code block of the guides runs as written (on the CPU), in
order within its page, as a reader would paste them; a block preceded by
`<!-- not run: REASON -->` is skipped, and must say why."""
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGES = ["docs/llama.md", "docs/python.md"]


@pytest.mark.parametrize("page", PAGES)
def test_python_blocks_run(page, monkeypatch):
    text = open(os.path.join(ROOT, page)).read()
    blocks = [code for mark, code in re.findall(r"(<!-- not run: [^>]*\S[^>]* -->\n)?```python\n(.*?)```", text, re.S)
              if not mark]
    assert blocks, f"{page} has no Python block to run"
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(ROOT)
    scope = {"__name__": "__docs__"}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{page}, block {i + 1}", "exec"), scope)
        except Exception as e:
            raise AssertionError(f"{page}, Python block {i + 1} fails: {type(e).__name__}: {e}") from e
