"""Tensor views (slice, indexing, transpose, permute, reshape, broadcast_to),
copies between layouts, and oxide.zeros / full / arange, against numpy."""
import gc
import weakref

import pytest

import oxide

np = pytest.importorskip("numpy")


def _grid(dev, shape=(4, 6)):
    ref = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    return oxide.tensor(ref, device=dev), ref


def test_zeros_full_arange(dev):
    assert oxide.zeros((2, 3), "i32", dev).numpy().tolist() == [[0] * 3] * 2
    assert oxide.zeros(4, device=dev).dtype == "f32"
    assert oxide.full((2, 2), 7, "i64", dev).numpy().tolist() == [[7, 7], [7, 7]]
    assert oxide.full(3, 0.5, oxide.f16, dev).numpy().tolist() == [0.5] * 3
    assert oxide.full(2, 1.5, "bf16", dev).tolist() == [1.5, 1.5]
    assert oxide.full((), True, "bool", dev).tolist() is True
    with pytest.raises(ValueError, match="not exact as a double"):
        oxide.full(1, (1 << 60) + 1, "i64", dev)
    with pytest.raises(TypeError):
        oxide.full(1, "x", device=dev)
    assert oxide.arange(5, dtype="i32", device=dev).tolist() == [0, 1, 2, 3, 4]
    assert oxide.arange(1, 2, 0.25, device=dev).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert oxide.arange(5, 0, -2, dtype="i64", device=dev).tolist() == [5, 3, 1]
    assert oxide.arange(0, device=dev).shape == (0,)


def test_slices_and_indexing(dev):
    t, ref = _grid(dev)
    for key in [np.s_[1:3], np.s_[:, 1:5:2], np.s_[-1], np.s_[2, 3], np.s_[..., 0],
                np.s_[::3, -2:], np.s_[1:100], np.s_[3:1], np.s_[...]]:
        v = t[key]
        assert v.shape == ref[key].shape, key
        assert np.array_equal(v.numpy(), ref[key]), key
        assert v.base is t
    assert np.array_equal(t.slice(1, 2).numpy(), ref[:, 2:])
    assert np.array_equal(t.slice(-1, None, 4, 3).numpy(), ref[:, :4:3])
    assert [row.tolist() for row in t] == ref.tolist()  # iteration stops at the end
    with pytest.raises(IndexError):
        t[4]
    with pytest.raises(IndexError):
        t[0, 0, 0]
    with pytest.raises(ValueError, match="positive"):
        t[::-1]
    with pytest.raises(IndexError):
        t["a"]


def test_transpose_permute_reshape_broadcast(dev):
    t, ref = _grid(dev, (2, 3, 4))
    assert np.array_equal(t.transpose(0, 2).numpy(), ref.transpose(2, 1, 0))
    assert np.array_equal(t.permute(1, 2, 0).numpy(), ref.transpose(1, 2, 0))
    assert np.array_equal(t.permute((2, 0, 1)).numpy(), ref.transpose(2, 0, 1))
    assert np.array_equal(t.T.numpy(), ref.T)
    assert t.T.stride() == (1, 4, 12) and t.stride() == (12, 4, 1) and t.stride(-1) == 1
    assert np.array_equal(t.reshape(6, -1).numpy(), ref.reshape(6, -1))
    assert np.array_equal(t.reshape((4, 6)).numpy(), ref.reshape(4, 6))
    with pytest.raises(oxide.InvalidArgumentError):
        t.T.reshape(24)  # would need a copy ...
    assert np.array_equal(t.T.contiguous().reshape(24).numpy(), ref.T.reshape(24))  # ... so copy
    with pytest.raises(ValueError):
        t.permute(0, 1)
    with pytest.raises(IndexError):
        t.transpose(0, 3)
    row = oxide.tensor([1.0, 2.0, 3.0], device=dev)
    b = row.broadcast_to((2, 3))
    assert b.is_read_only and b.stride() == (0, 1) and b.tolist() == [[1.0, 2.0, 3.0]] * 2
    with pytest.raises(oxide.InvalidArgumentError):
        row.broadcast_to((2, 4))


def test_views_share_memory_and_keep_the_parent(dev):
    t, ref = _grid(dev)
    col = t[:, 1]
    parent = weakref.ref(t)
    del t
    gc.collect()
    assert parent() is not None
    col.copy_from([10.0, 11.0, 12.0, 13.0])  # a strided view, written from the host
    ref[:, 1] = [10, 11, 12, 13]
    assert np.array_equal(parent().numpy(), ref)
    parent()[0].copy_from(oxide.tensor([-1.0] * 6, device=dev))  # from a tensor
    ref[0] = -1
    assert np.array_equal(parent().numpy(), ref) and col.tolist()[0] == -1.0
    del col
    gc.collect()
    assert parent() is None


def test_to_and_contiguous(dev):
    t, ref = _grid(dev)
    assert t.contiguous() is t
    c = t.T.contiguous()
    assert c.is_contiguous() and c.base is None and np.array_equal(c.numpy(), ref.T)
    cpu = t.T.to("cpu")
    assert cpu.device is oxide.device("cpu") and np.array_equal(cpu.numpy(), ref.T)
    assert t.T.tobytes() == ref.T.tobytes()
