"""f32 exp, exp2, ln and log2 on the CPU are Oxide's own inline code (so that
loops of them vectorize; core/backend/math.c): their accuracy against float64
over the whole range, subnormal results and inputs included, and their special
values; and that a kernel with bounds checks, whose loop stays scalar, takes
libm's logf instead."""
import numpy as np
import pytest

import oxide

FNS = ("exp", "exp2", "ln", "log2")
# a launch contract proves the reads in bounds: without checks the inline code is
# used for ln and log2 too (a kernel with checks takes libm's, math.c says why)
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


def test_checked_kernels_take_libm_log():
    """With bounds checks the thread loop cannot vectorize, and libm's logf is cheaper
    there: the CPU code calls it (and still calls no expf)."""
    checked = SRC.replace("#[launch_contract(block = (256, 1, 1), requires = (x.len() >= y.len()))]\n", "")
    asm_checked = oxide.emit(checked, "asm", target="cpu")
    asm_inline = oxide.emit(SRC, "asm", target="cpu")
    assert "logf" in asm_checked and "expf" not in asm_checked
    assert "logf" not in asm_inline and "expf" not in asm_inline
