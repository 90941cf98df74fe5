"""What the CPU benchmarks share: a median timing, and their two modes. With
paths to liboxide builds as arguments, the script runs once per build, each
in a subprocess of its own (OXIDE_LIBRARY), its `name<TAB>value` lines printed
side by side, one column a build (named by the build's folder, and its
checkout's where two folders share a name); without, it prints its rows."""
import os
import subprocess
import sys
import time


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


def median_s(fn, runs=6):
    """Seconds of fn(): the median of runs - 1 timings after a first, warm-up run."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times = sorted(times[1:])
    return times[len(times) // 2]


def run(script, measure, unit):
    """The benchmark's main: side by side over the builds given as arguments, or
    measure()'s rows (a dict of name -> value) as `name<TAB>value` lines."""
    if len(sys.argv) > 1:
        side_by_side(script, sys.argv[1:], unit, sep="\t")
        return
    for key, val in measure().items():
        print(f"{key}\t{val}")
