"""The binding refuses a liboxide built from another oxide.h (ox_abi_version)."""
import pytest

from oxide import _decls, _lib


class _FakeFn:
    def __init__(self, value):
        self.value = value

    def __call__(self):
        return self.value


class _FakeLib:
    def __init__(self, abi):
        if abi is not None:
            self.ox_abi_version = _FakeFn(abi)


def test_the_loaded_library_matches():
    assert _lib.lib.ox_abi_version() == _decls.OX_ABI_VERSION


@pytest.mark.parametrize("abi", [_decls.OX_ABI_VERSION - 1, _decls.OX_ABI_VERSION + 1])
def test_another_abi_is_refused(abi):
    with pytest.raises(ImportError, match=f"has ABI {abi}, this package needs ABI"):
        _lib._check_abi(_FakeLib(abi), "libfake.so")


def test_a_library_without_the_check_is_refused():
    with pytest.raises(ImportError, match="older than this package"):
        _lib._check_abi(_FakeLib(None), "libold.so")
