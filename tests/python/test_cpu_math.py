"""f32 exp, exp2, ln and log2 on the CPU are Oxide's own inline code (so that
loops of them vectorize; core/backend/math.c): their accuracy against float64
over the whole range, subnormal results and inputs included, and their special
values; and that a kernel with bounds checks takes them too. f32 sin, cos and tan are libm's, widened to glibc's
vector variants (libmvec) where there are some: their accuracy over small and
huge arguments."""
import numpy as np
import pytest

import oxide

FNS = ("exp", "exp2", "ln", "log2")
# under a launch contract (no bounds checks); test_checked_kernels_vectorize_inline_log
# has the checked form
SRC = "".join(f"""
#[kernel]
#[launch_contract(block = (256, 1, 1), requires = (x.len() >= y.len()))]
fn k_{f}(x: &[f32], y: DisjointSlice<f32>) {{
    let i = thread::index_1d();
    if let Some(o) = y.get_mut(i) {{ *o = {f}(x[i]); }}
}}
""" for f in FNS)
REF = {"exp": np.exp, "exp2": np.exp2, "ln": np.log, "log2": np.log2}
# the most ulp measured (language.md section 5.5 quotes them), a little slack
BOUND = {"exp": 1.0, "exp2": 1.0, "ln": 1.0, "log2": 1.6}


def inputs(f, rng):
    if f in ("ln", "log2"):  # (0, 4], then every binade, subnormals included
        return np.concatenate([(rng.random(300_000) * 4).astype(np.float32),
                               (2.0 ** rng.uniform(-149, 128, 300_000)).astype(np.float32)])
    lo, hi = (-104, 89) if f == "exp" else (-150, 128)
    return rng.uniform(lo, hi, 600_000).astype(np.float32)


def run(m, f, x):
    y = np.zeros_like(x)
    m["k_" + f](x, y, grid=(len(x) + 255) // 256, block=256)
    return y


@pytest.mark.parametrize("f", FNS)
def test_accuracy(f):
    m = oxide.compile(SRC, "cpu")
    x = inputs(f, np.random.default_rng(7))
    y = run(m, f, x)
    with np.errstate(over="ignore", under="ignore"):
        ref = REF[f](x.astype(np.float64))
        r32 = ref.astype(np.float32)
    fin = np.isfinite(r32)
    assert np.isfinite(y[fin]).all()
    assert (y[~fin] == r32[~fin]).all()  # overflow to inf where float32 overflows
    # ulps of the float32 result; below the normals, of the subnormals' spacing
    ulp = np.spacing(np.maximum(np.abs(r32[fin]), np.float32(2.0 ** -126))).astype(np.float64)
    err = np.abs(y[fin].astype(np.float64) - ref[fin]) / ulp
    assert err.max() <= BOUND[f], (f, err.max(), x[fin][np.argmax(err)])


def test_special_values():
    m = oxide.compile(SRC, "cpu")
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, 1.0, inf, -inf, nan, -1.0, 1e-45], dtype=np.float32)
    with np.errstate(all="ignore"):
        for f in FNS:
            want = REF[f](x.astype(np.float64)).astype(np.float32)
            got = run(m, f, x)
            assert ((got == want) | (np.isnan(got) & np.isnan(want))).all(), (f, got, want)


TRIG = ("sin", "cos", "tan")
TRIG_SRC = "".join(f"""
#[kernel]
fn t_{f}(x: &[f32], y: DisjointSlice<f32>) {{
    let i = thread::index_1d();
    if let Some(o) = y.get_mut(i) {{ *o = {f}(x[i]); }}
}}
""" for f in TRIG)
# glibc's vector variants (libmvec, where the CPU has AVX2 or AVX-512; libm's scalar
# functions elsewhere): the most ulp measured, a little slack (language.md section 5.5)
TRIG_BOUND = {"sin": 2.0, "cos": 2.0, "tan": 4.0}


@pytest.mark.parametrize("f", TRIG)
def test_trig_accuracy(f):
    m = oxide.compile(TRIG_SRC, "cpu")
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.uniform(-10, 10, 400_000), rng.uniform(-1e6, 1e6, 100_000),
                        rng.uniform(-3e38, 3e38, 100_000)]).astype(np.float32)
    y = np.zeros_like(x)
    m["t_" + f](x, y, grid=(len(x) + 255) // 256, block=256)
    ref = getattr(np, f)(x.astype(np.float64))
    ulp = np.spacing(np.maximum(np.abs(ref.astype(np.float32)), np.float32(2.0 ** -126))).astype(np.float64)
    err = np.abs(y.astype(np.float64) - ref) / ulp
    assert err.max() <= TRIG_BOUND[f], (f, err.max(), x[np.argmax(err)])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=np.float32)
    got = np.zeros_like(special)
    m["t_" + f](special, got, grid=1, block=256)
    assert got[0] == 0.0 or f == "cos"
    assert np.isnan(got[2:]).all()


def test_trig_loops_vectorize():
    """Where glibc's vector math library is there (x86-64 with AVX2 or AVX-512), a loop of
    sin widens to its vector variant: one call per 8 or 16 elements."""
    import ctypes.util
    import platform
    asm = oxide.emit(TRIG_SRC, "asm", target="cpu")
    flags = open("/proc/cpuinfo").read() if platform.machine() == "x86_64" else ""
    if ctypes.util.find_library("mvec") and (" avx2" in flags or " avx512f" in flags):
        assert "_ZGV" in asm and "v_sinf" in asm and "v_cosf" in asm and "v_tanf" in asm
    else:
        assert "_ZGV" not in asm


def test_checked_kernels_vectorize_inline_log():
    """A kernel with bounds checks vectorizes too (IRCE takes the checks out of the
    thread loop's main range), and takes the inline ln and log2 like one without:
    no call of libm's logf or expf."""
    checked = SRC.replace("#[launch_contract(block = (256, 1, 1), requires = (x.len() >= y.len()))]\n", "")
    for src in (checked, SRC):
        asm = oxide.emit(src, "asm", target="cpu")
        assert "logf" not in asm and "expf" not in asm
