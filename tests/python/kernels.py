"""Kernels shared by the tests, inline so that the tests need no files."""

VECADD = """\
#[kernel]
#[launch_contract(block = (256, 1, 1), requires = (a.len() >= c.len(), b.len() >= c.len()))]
fn vecadd(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(out) = c.get_mut(i) {
        *out = a[i] + b[i];
    }
}
"""

SAXPY = """\
#[kernel]
fn saxpy(x: &[f32], y: &[f32], out: DisjointSlice<f32>, alpha: f32) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) {
        *o = alpha * x[i] + y[i];
    }
}
"""

# Reads one past its own index: the last thread reads out of bounds.
OOB = """\
#[kernel]
fn oob(a: &[f32], c: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(o) = c.get_mut(i) {
        *o = a[i.get() + 1];
    }
}
"""


def bounds_errors(*steps):
    """Runs each step (a launch, a synchronize, a host read); returns the
    oxide.BoundsErrors they raised, in order. An out-of-bounds access raises
    exactly once: at its launch on the CPU (the kernel has run), on CUDA at
    the launch if the kernel has already recorded it, else at the next
    synchronize or host read of its stream."""
    import oxide
    errors = []
    for step in steps:
        try:
            step()
        except oxide.BoundsError as e:
            errors.append(e)
    return errors
