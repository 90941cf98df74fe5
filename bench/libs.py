"""Before/after runs of a CPU benchmark: the script run once per liboxide build,
each in a subprocess of its own (OXIDE_LIBRARY), its `name<sep>value` lines
printed side by side, one column a build (named by the build's folder, and its
checkout's where two folders share a name)."""
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
    names = [os.path.basename(os.path.dirname(lib)) for lib in libs]
    if len(set(names)) < len(names):  # two builds named `build`: name each by its checkout too
        names = ["/".join(os.path.dirname(os.path.abspath(lib)).split("/")[-2:]) for lib in libs]
    print(f"{unit:<{width}} " + " ".join(f"{n[-14:]:>14}" for n in names))
    for key in cols[0]:
        print(f"{key:<{width}} " + " ".join(f"{float(c[key]):14.3f}" for c in cols))
