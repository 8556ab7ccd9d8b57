"""python/README.md's example runs as written (a user's first script)."""

import os
import re
import subprocess
import sys


def test_readme_example_runs():
    readme = os.path.join(os.path.dirname(__file__), "..", "README.md")
    blocks = re.findall(r"```python\n(.*?)```", open(readme).read(), re.S)
    assert blocks, "no python example in python/README.md"
    r = subprocess.run([sys.executable, "-c", blocks[0]], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"decode over 100 tokens: max error (\S+)", r.stdout)
    assert m and float(m.group(1)) < 1e-4, r.stdout  # f32 sums of f16-exact values
