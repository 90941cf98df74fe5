"""Before/after runs of a CPU benchmark: the script run once per liboxide build,
each in a subprocess of its own (OXIDE_LIBRARY), its `name<sep>value` lines
printed side by side, one column a build (named by the build's folder)."""
import os
import subprocess
import sys


def side_by_side(script, libs, unit, sep=" "):
    cols = []
    for lib in libs:
        env = dict(os.environ, OXIDE_LIBRARY=lib)
        r = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, check=True)
        cols.append(dict(line.rsplit(sep, 1) for line in r.stdout.strip().splitlines()))
    width = max(len(k) for k in cols[0]) + 1
    print(f"{unit:<{width}} " + " ".join(f"{os.path.basename(os.path.dirname(l)):>14}" for l in libs))
    for key in cols[0]:
        print(f"{key:<{width}} " + " ".join(f"{float(c[key]):14.3f}" for c in cols))
