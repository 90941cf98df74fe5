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

# Kernels built to break the rule of core/front/stride.c: each can tell which thread owns
# an element, so each must keep the GPU's owner, (i / 4) mod T, on the CPU too. Each writes
# out[t] = how many elements thread t handled (or its identity into each element).
HOSTILE = """
// the thread's identity through a device function, before the loop
fn me() -> u32 { thread::index_1d().get() as u32 }
#[kernel]
fn via_function(c: DisjointSlice<u32>) {
    let t = me();
    for i in thread::grid_stride(c.len()) {
        if let Some(o) = c.get_mut(i) { *o = t; }
    }
}

// a local array declared outside the loop, written in it
#[kernel]
fn outer_array(a: &[u32], out: DisjointSlice<u32>) {
    let mut n = [0u32; 1];
    for i in thread::grid_stride(a.len()) {
        n[0] += a[i];
    }
    if let Some(o) = out.get_mut(thread::index_1d()) { *o = n[0]; }
}

// an outer variable assigned before a name in the loop shadows it
#[kernel]
fn shadowed(a: &[u32], out: DisjointSlice<u32>) {
    let mut n = 0u32;
    for i in thread::grid_stride(a.len()) {
        n += a[i];
        let n = 7u32;
        let _k = n;
    }
    if let Some(o) = out.get_mut(thread::index_1d()) { *o = n; }
}

// a ticket from an atomic, before the loop: a number of the thread's own
#[kernel]
fn ticket(h: &[Atomic<u32>], c: DisjointSlice<u32>) {
    let t = h.atomic_add(0, 1u32);
    for i in thread::grid_stride(c.len()) {
        if let Some(o) = c.get_mut(i) { *o = t; }
    }
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


@pytest.mark.parametrize("grid, block", SHAPES)
def test_kernels_that_can_tell_the_owner_keep_it(dev, grid, block):
    m = oxide.compile(HOSTILE, device=dev)
    T, n = grid * block, 40003
    owner = (np.arange(n) // 4) % T
    c = oxide.tensor(np.zeros(n, dtype=np.uint32), device=dev)
    m.via_function(c, grid=grid, block=block)
    assert np.array_equal(c.numpy(), owner)
    a = np.ones(n, dtype=np.uint32)
    want = np.bincount(owner, minlength=T).astype(np.uint32)
    for k in (m.outer_array, m.shadowed):
        out = oxide.tensor(np.zeros(T, dtype=np.uint32), device=dev)
        k(oxide.tensor(a, device=dev), out, grid=grid, block=block)
        assert np.array_equal(out.numpy(), want), k
    # tickets: each element holds its owner's ticket, so the elements of one owner agree
    h = oxide.tensor(np.zeros(1, dtype=np.uint32), device=dev)
    m.ticket(h, c, grid=grid, block=block)
    got = c.numpy()
    for t in np.unique(owner)[:50]:
        assert len(np.unique(got[owner == t])) == 1
    assert len(np.unique(got)) == min(T, -(-n // 4))
