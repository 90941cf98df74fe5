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
