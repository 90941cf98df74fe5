"""The CPU's two ways of running SIMT kernels whose threads wait for each
other must agree: threads in loops between rendezvous points (core/ir/
threads.c) and one fiber a thread (kept for kernels with local arrays). Random
kernels, made here from a fixed seed, with barriers in loops, shuffles and
votes in code only some warps run, early returns and partial warps, run both
ways (the second with a local array added, which keeps the fibers); the
outputs must be equal. Barriers stay in code every thread of the block runs,
warp operations in code every lane of a warp runs, as the language's
semantics define them there."""
import random

import pytest

import oxide

np = pytest.importorskip("numpy")

B = 96  # threads a block: three warps (and launches of 80: a partial warp)


def _stmt(rng, depth, warp_uniform_only, alive="thread::block_dim_x()"):
    """A statement on `v` (u32) of thread `t` (u32), `i` its global index;
    `alive`: the threads that have not returned (a barrier reads only their
    elements of the shared array)."""
    k = rng.randrange(1, 32)
    choices = ["arith", "read", "shuffle", "vote"]
    if not warp_uniform_only:
        choices += ["barrier", "loop"] * 2
    if depth < 2:
        choices += ["warp_if"]
    c = rng.choice(choices)
    if c == "arith":
        return f"v = v * {rng.randrange(1, 9)}u32 + {rng.randrange(100)}u32;"
    if c == "read":
        return f"v = v + x[(i.get() + {k}usize) % x.len()];"
    if c == "shuffle":
        f = rng.choice(["shuffle_xor(v, {k}u32)", "shuffle_down(v, {k}u32)", "shuffle_up(v, {k}u32)",
                        "shuffle(v, {k}u32)"]).format(k=k)
        return f"v = v + warp::{f};"
    if c == "vote":
        f = rng.choice([f"warp::ballot(v % {k + 1}u32 == 0)", f"warp::any(v % {k + 1}u32 == 0) as u32",
                        "warp::all(v % 2u32 == 0) as u32"])
        return f"v = v ^ {f};"
    if c == "barrier":
        return (f"s[t as usize] = v; sync_threads(); v = v + s[((t + {k}u32) % {alive}) as usize] / 3u32;"
                " sync_threads();")
    if c == "loop":
        body = " ".join(_stmt(rng, depth + 1, False, alive) for _ in range(rng.randrange(1, 3)))
        return f"let mut j{depth} = 0u32; while j{depth} < {rng.randrange(1, 4)}u32 {{ {body} j{depth} = j{depth} + 1u32; }}"
    body = " ".join(_stmt(rng, depth + 1, True) for _ in range(rng.randrange(1, 3)))
    return f"if t / 32u32 % 2u32 == {rng.randrange(2)}u32 {{ {body} }} else {{ v = v + 7u32; }}"


def _kernel(rng, fibers):
    n = rng.randrange(2, 6)
    ret = rng.randrange(n + 1) if rng.random() < 0.4 else -1  # whole warps return early there
    stmts, alive = [], "thread::block_dim_x()"
    for j in range(n + 1):
        if j == ret:
            r = rng.choice([32, 64])  # (both launches have more threads)
            stmts.append(f"if t >= {r}u32 {{ return; }}")
            alive = f"{r}u32"
        if j < n:
            stmts.append(_stmt(rng, 0, False, alive))
    local = "let mut z = [0u32; 2]; z[(t % 2u32) as usize] = v; v = z[(t % 2u32) as usize];" if fibers else ""
    return ("#[kernel]\n"
            "fn k(x: &[u32], out: DisjointSlice<u32>) {\n"
            f"    let mut s = SharedArray::<u32, {B}>::new();\n"
            "    let t = thread::thread_idx_x();\n"
            "    let i = thread::index_1d();\n"
            "    let mut v = x[i.get()];\n"
            f"    {local}\n"
            + "".join(f"    {st}\n" for st in stmts) +
            "    if let Some(o) = out.get_mut(i) { *o = v; }\n"
            "}\n")


@pytest.mark.parametrize("seed", range(int(__import__("os").environ.get("OXIDE_FUZZ_KERNELS", "24"))))
def test_loops_and_fibers_agree(seed):
    dev = oxide.device("cpu")
    rng = random.Random(seed)
    src_rng = random.Random(seed)
    looped, fibered = _kernel(src_rng, False), _kernel(random.Random(seed), True)
    x = np.array([rng.randrange(1 << 20) for _ in range(2 * B)], dtype=np.uint32)
    for block in (B, 80):
        outs = []
        for src in (looped, fibered):
            out = np.full(2 * B, 0xDEADBEEF, dtype=np.uint32)
            try:
                oxide.compile(src, device=dev, filename=f"fuzz{seed}.oxk").k(x, out, grid=2, block=block)
            except oxide.CompileError as e:  # the generator's fault, not the executor's
                pytest.fail(f"{e}\n{src}")
            outs.append(out)
        assert (outs[0] == outs[1]).all(), f"block {block}: loops {outs[0][:8]} fibers {outs[1][:8]}\n{looped}"
