"""Rows longer than one tile (docs/language.md section 12.8, "Rows longer than
a tile"): examples/tile_softmax_long.oxk and examples/tile_layernorm_long.oxk
walk a row in column tiles for its statistics, then write their own [1, BN]
tile of it. Checked against NumPy in float64 at 2^18 + 3 columns (five tiles
of 65536, the last holding 3 columns; and seventeen of 16384) and at small
odd widths (several small tiles; less than one tile)."""
import pathlib

import pytest

import oxide

np = pytest.importorskip("numpy")

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
LONG = 2**18 + 3

# (rows, columns, BN)
SHAPES = [(3, LONG, 65536), (3, LONG, 16384), (5, 1001, 64), (4, 5, 64)]


def _kernel(dev, name, fn):
    path = EXAMPLES / f"{name}.oxk"
    return getattr(oxide.compile(path.read_text(), device=dev, filename=path.name), fn)


@pytest.mark.parametrize("rows,n,bn", SHAPES)
def test_softmax_long(dev, rows, n, bn):
    xs = np.random.default_rng(n + bn).standard_normal((rows, n)).astype(np.float32) * 4
    xs[0, n // 2] = 30.0  # a maximum in the middle of the row: the sum is rescaled after it
    y = oxide.full((rows, n), float("nan"), device=dev)  # an element not written stays NaN
    p = y.partition((1, bn))
    assert p.tile_grid == (rows, (n + bn - 1) // bn)
    _kernel(dev, "tile_softmax_long", "softmax_long")(p, oxide.tensor(xs, device=dev))
    x64 = xs.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=0)


@pytest.mark.parametrize("rows,n,bn", SHAPES)
def test_layernorm_long(dev, rows, n, bn):
    rng = np.random.default_rng(n + bn + 1)
    # a mean far from 0 against the spread (80 to 100 against 1 to 3): a
    # variance taken as E[x^2] - mean^2 in f32 misses the tolerance below by 2
    # to 18 times on these shapes; the kernel's stays within a quarter of it
    mean = rng.choice([-1.0, 1.0], size=(rows, 1)) * rng.uniform(80, 100, size=(rows, 1))
    xs = (mean + rng.uniform(1, 3, size=(rows, 1)) * rng.standard_normal((rows, n))).astype(np.float32)
    w = (1 + 0.5 * rng.standard_normal((1, n))).astype(np.float32)
    b = (0.5 * rng.standard_normal((1, n))).astype(np.float32)
    eps = 1e-5
    y = oxide.full((rows, n), float("nan"), device=dev)
    _kernel(dev, "tile_layernorm_long", "layernorm_long")(
        y.partition((1, bn)), oxide.tensor(xs, device=dev), oxide.tensor(w, device=dev),
        oxide.tensor(b, device=dev), eps)
    x64 = xs.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mu) ** 2).mean(axis=1, keepdims=True)
    want = (x64 - mu) / np.sqrt(var + eps) * w + b
    # f32 rounds the mean (|mean| up to 100) to about 1e-5; rsqrt on a GPU is
    # approximate (relative 2e-4 at most)
    np.testing.assert_allclose(y.numpy(), want, rtol=2e-4, atol=1e-4)


def test_docs_show_the_example():
    """Section 12.8's "Rows longer than a tile" shows the example's kernel as it is."""
    doc = (EXAMPLES.parent / "docs" / "language.md").read_text()
    section = doc[doc.index("#### Rows longer than a tile"):]
    block = section[section.index("```rust\n") + len("```rust\n"):]
    block = block[:block.index("```")]
    src = (EXAMPLES / "tile_softmax_long.oxk").read_text()
    assert block == src[src.index("#[tile]"):]
