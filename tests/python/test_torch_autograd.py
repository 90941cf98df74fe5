"""Training through Oxide operators (oxide.torch.custom_op with backward=):
gradcheck in f64 with dtype-generic kernels, a backward written with Oxide
kernels and one written in torch, under torch.compile and torch.func; an
operator without a backward raises when a gradient flows through it; a
strided input to a SIMT kernel. Needs torch (skipped without it); the CUDA
cases are GPU tests."""
import pytest

import oxide

torch = pytest.importorskip("torch")
import oxide.torch  # noqa: E402  (needs torch)

SRC = """
#[kernel]
fn gelu<T: Float>(x: &[T], y: DisjointSlice<T>) {
    let i = thread::index_1d();
    if let Some(o) = y.get_mut(i) {
        let v = x[i];
        *o = 0.5 * v * (1.0 + erf(v * 0.7071067811865476));
    }
}
// d gelu / dx = cdf(x) + x pdf(x), times the incoming gradient
#[kernel]
fn gelu_grad<T: Float>(x: &[T], g: &[T], dx: DisjointSlice<T>) {
    let i = thread::index_1d();
    if let Some(o) = dx.get_mut(i) {
        let v = x[i];
        let cdf = 0.5 * (1.0 + erf(v * 0.7071067811865476));
        let pdf = exp(-0.5 * v * v) * 0.3989422804014327;
        *o = g[i] * (cdf + v * pdf);
    }
}
#[tile]
fn softmax<T: Float, const BN: i32>(y: &mut Tensor<T, [1, BN]>, x: &Tensor<T, [-1, -1]>) {
    let t = x.partition([1, BN]).load_padded([tile_id(0), 0], T::NEG_INFINITY);
    let e = exp(t - reduce_max(t, 1));
    y.store(e / reduce_sum(e, 1));
}
"""

_OPS = {}


def ops(devtype):
    """gelu (backward: the Oxide kernel gelu_grad, itself an operator),
    softmax (backward in torch), and gelu again without a backward."""
    if devtype in _OPS:
        return _OPS[devtype]
    mod = oxide.compile(SRC, devtype)
    ns = f"oxide_autograd_{devtype}"
    grid = lambda *a: ((a[0].numel() + 255) // 256,)
    gelu_grad = oxide.torch.custom_op(f"{ns}::gelu_grad", mod.gelu_grad,
                                      outputs={"dx": lambda x, g: torch.empty_like(x)}, grid=grid, block=256)

    def gelu_backward(ctx, g):
        (x,), _ = oxide.torch.saved(ctx)
        return gelu_grad(x, g)
    gelu = oxide.torch.custom_op(f"{ns}::gelu", mod.gelu, outputs={"y": lambda x: torch.empty_like(x)},
                                 grid=grid, block=256, backward=gelu_backward)

    def softmax_backward(ctx, g):
        _, (y,) = oxide.torch.saved(ctx)
        return y * (g - (g * y).sum(dim=1, keepdim=True))
    softmax = oxide.torch.custom_op(
        f"{ns}::softmax", mod.softmax, outputs={"y": lambda x: torch.empty_like(x)},
        tile={"y": lambda y, x: (1, 1 << max(0, (x.shape[1] - 1).bit_length()))}, backward=softmax_backward)
    plain = oxide.torch.custom_op(f"{ns}::gelu_nograd", mod.gelu, outputs={"y": lambda x: torch.empty_like(x)},
                                  grid=grid, block=256)
    _OPS[devtype] = gelu, softmax, plain
    return _OPS[devtype]


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def tdev(request):
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.fail("GPU tests asked for, and torch sees no CUDA device")
    return request.param


def test_gradcheck_in_f64(tdev):
    gelu, softmax, _ = ops(tdev)
    x = torch.randn(300, dtype=torch.float64, device=tdev, requires_grad=True)
    assert torch.autograd.gradcheck(gelu, (x,))
    a = torch.randn(7, 37, dtype=torch.float64, device=tdev, requires_grad=True)
    assert torch.autograd.gradcheck(softmax, (a,))
    # the forward against torch's, in f32 too (one source for both dtypes)
    for dt in (torch.float32, torch.float64):
        v = torch.randn(1000, dtype=dt, device=tdev)
        torch.testing.assert_close(gelu(v), torch.nn.functional.gelu(v))


def test_backward_eager_compiled_and_under_torch_func(tdev):
    gelu, softmax, _ = ops(tdev)

    def loss(x):
        return (softmax(gelu(x).reshape(10, 30)) * torch.arange(30, device=x.device, dtype=x.dtype)).sum()

    def ref(x):
        return (torch.softmax(torch.nn.functional.gelu(x).reshape(10, 30), dim=1)
                * torch.arange(30, device=x.device, dtype=x.dtype)).sum()

    x = torch.randn(300, device=tdev, requires_grad=True)
    loss(x).backward()
    want = torch.autograd.grad(ref(x), x)[0]
    torch.testing.assert_close(x.grad, want, rtol=1e-4, atol=1e-5)
    torch._dynamo.reset()
    compiled = torch.compile(loss, fullgraph=True)  # a graph break would be an error
    x2 = x.detach().clone().requires_grad_()
    compiled(x2).backward()
    torch.testing.assert_close(x2.grad, want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.func.grad(loss)(x.detach()), want, rtol=1e-4, atol=1e-5)


def test_an_operator_without_backward_raises_when_a_gradient_flows(tdev):
    _, _, plain = ops(tdev)
    x = torch.randn(100, device=tdev, requires_grad=True)
    y = plain(x)  # the forward runs
    with pytest.raises(RuntimeError, match="has no backward.*backward=fn"):
        y.sum().backward()
    with torch.no_grad():  # and without a gradient nothing is asked of it
        torch.testing.assert_close(plain(x), torch.nn.functional.gelu(x))


def test_a_strided_input_to_a_simt_kernel_is_taken_as_its_values(tdev):
    gelu, _, _ = ops(tdev)
    x = torch.randn(30, 40, device=tdev)
    torch.testing.assert_close(gelu(x.T), torch.nn.functional.gelu(x.T))
    assert gelu(x.T).shape == (40, 30)


def test_setup_context_goes_with_backward():
    mod = oxide.compile(SRC, "cpu")
    with pytest.raises(ValueError, match="setup_context= goes with backward="):
        oxide.torch.custom_op("oxide_autograd_err::g", mod.gelu, outputs={"y": lambda x: torch.empty_like(x)},
                              grid=1, block=256, setup_context=lambda ctx, i, o: None)
