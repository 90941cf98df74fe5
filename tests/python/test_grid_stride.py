"""grid_stride loops (docs/language.md section 5.2) on every device: each
element once, with one owner in every loop of a kernel, and where the kernel
can tell (it reads its thread's identity, or carries a value from one element
to the next), the owner the docs give: thread (i / 4) mod T. On the CPU the
loops whose owner makes no difference run over contiguous runs instead
(core/front/stride.c); these tests hold either way."""
import pytest

import oxide

np = pytest.importorskip("numpy")

SRC = """
// two loops with different limits over one output: an element's owner must be the
// same thread in both, or the second loop's update may race with the first's
#[kernel]
fn twice(a: &[i32], c: DisjointSlice<i32>, n2: usize) {
    for i in thread::grid_stride(c.len()) {
        if i.get() % 7 == 3 { continue; }
        if let Some(o) = c.get_mut(i) { *o += a[i] + 1; }
    }
    for i in thread::grid_stride(n2) {
        if let Some(o) = c.get_mut(i) { *o += 1; }
    }
}

// the owner shows: each element gets its owner's index
#[kernel]
fn owner(c: DisjointSlice<u32>) {
    let t = thread::index_1d().get() as u32;
    for i in thread::grid_stride(c.len()) {
        if let Some(o) = c.get_mut(i) { *o = t; }
    }
}

// a value carried from one element to the next: each thread's sum of its elements
#[kernel]
fn sums(a: &[i64], out: DisjointSlice<i64>) {
    let mut s = 0i64;
    for i in thread::grid_stride(a.len()) {
        s += a[i];
    }
    if let Some(o) = out.get_mut(thread::index_1d()) { *o = s; }
}
"""

SHAPES = [(1, 1), (3, 64), (200, 64), (64, 256), (7, 96)]
LENS = [0, 1, 5, 4099, 40003, 70000]


@pytest.fixture
def mod(dev):
    return oxide.compile(SRC, device=dev)


@pytest.mark.parametrize("grid, block", SHAPES)
def test_every_element_once_in_both_loops(mod, dev, grid, block):
    for n in LENS:
        a = np.arange(n, dtype=np.int32) * 3
        for n2 in (n, n // 3, n + 17):
            c = oxide.tensor(np.full(n, 100, dtype=np.int32), device=dev)
            mod.twice(oxide.tensor(a, device=dev), c, n2, grid=grid, block=block)
            i = np.arange(n)
            want = 100 + np.where(i % 7 == 3, 0, a + 1) + (i < n2)
            assert np.array_equal(c.numpy(), want), (n, n2, grid, block)


@pytest.mark.parametrize("grid, block", SHAPES)
def test_owner_is_i_over_4_mod_T(mod, dev, grid, block):
    T = grid * block
    for n in (5, 4099, 40003):
        c = oxide.tensor(np.full(n, 7777, dtype=np.uint32), device=dev)
        mod.owner(c, grid=grid, block=block)
        assert np.array_equal(c.numpy(), (np.arange(n) // 4) % T)


@pytest.mark.parametrize("grid, block", SHAPES)
def test_carried_sum_per_owner(mod, dev, grid, block):
    T = grid * block
    n = 40003
    a = np.arange(n, dtype=np.int64) * 5 + 1
    out = oxide.tensor(np.zeros(T, dtype=np.int64), device=dev)
    mod.sums(oxide.tensor(a, device=dev), out, grid=grid, block=block)
    want = np.bincount((np.arange(n) // 4) % T, weights=a, minlength=T).astype(np.int64)
    assert np.array_equal(out.numpy(), want)
