"""Ctrl-C during a long CPU launch: the launch stops and KeyboardInterrupt is
raised in Python (the binding enables ox_cancel_on_sigint around CPU launches),
and the device works afterwards."""
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

CHILD = r'''
import signal
import sys
import oxide

# Python's usual Ctrl-C handler, also where the test runs with SIGINT ignored
# (a background job of a shell)
signal.signal(signal.SIGINT, signal.default_int_handler)

SRC = """
#[kernel]
fn spin(a: &[f32], out: DisjointSlice<f32>) {
    let mut x = 0.0f32;
    while x >= 0.0 { x += a[0]; }
    if let Some(o) = out.get_mut(thread::index_1d()) { *o = x; }
}
#[kernel]
fn spin_sync(a: &[f32], out: DisjointSlice<f32>) {
    let mut x = 0.0f32;
    while x >= 0.0 { x += a[0]; sync_threads(); }
    if let Some(o) = out.get_mut(thread::index_1d()) { *o = x; }
}
#[kernel]
fn fill(out: DisjointSlice<f32>, v: f32) {
    if let Some(o) = out.get_mut(thread::index_1d()) { *o = v; }
}
"""
dev = oxide.device("cpu")
mod = oxide.compile(SRC, device=dev)
one = oxide.tensor([1.0], device=dev)
out = oxide.zeros(256, "f32", dev)
for name in sys.argv[1:]:
    print("start", name, flush=True)
    try:
        mod[name](one, out, grid=8, block=32)
        print("finished", flush=True)  # never: the kernel is endless
        sys.exit(3)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
    mod.fill(out, oxide.f32(2.0), grid=2, block=128)
    print("after", out.tolist()[255], flush=True)
    # a handler set after launches (over Oxide's, which the binding keeps installed): the next
    # launch puts Oxide's back in front of it, so Ctrl-C still stops that launch
    signal.signal(signal.SIGINT, signal.default_int_handler)
'''


def line_reader(p):
    """A function that returns the child's next line, or "" after `timeout`
    seconds without one (a thread reads the lines as they come)."""
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in p.stdout], daemon=True).start()

    def readline(timeout=10):
        try:
            return lines.get(timeout=timeout)
        except queue.Empty:
            return ""
    return readline


@pytest.mark.parametrize("kernels", [["spin"], ["spin_sync", "spin"]])
def test_ctrl_c_stops_a_cpu_launch(kernels):
    env = dict(os.environ, OXIDE_CPU_THREADS="4")
    p = subprocess.Popen([sys.executable, "-c", CHILD, *kernels], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    readline = line_reader(p)
    try:
        for name in kernels:
            line = readline(60)
            assert line == f"start {name}\n", line
            time.sleep(0.3)  # the launch is running by now
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
            assert readline() == "KeyboardInterrupt\n", "Ctrl-C did not stop the launch"
            assert time.monotonic() - t0 < 5
            assert readline() == "after 2.0\n"
        p.wait(timeout=30)
        err = p.stderr.read()
    finally:
        p.kill()
    assert p.returncode == 0, err
