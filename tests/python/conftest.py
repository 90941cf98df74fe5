"""Shared fixtures. Every test that takes `dev` runs on the CPU, and again on
CUDA device 0 when GPU tests are enabled (--gpu or OXIDE_TEST_GPU=1); without
that the CUDA runs are skipped with a reason, never silently dropped."""
import os

import pytest

import oxide

GPU_REASON = "GPU test: pass --gpu or set OXIDE_TEST_GPU=1 to run it"


def pytest_addoption(parser):
    parser.addoption("--gpu", action="store_true", help="also run the tests marked gpu")


def gpu_enabled(config):
    return config.getoption("--gpu") or os.environ.get("OXIDE_TEST_GPU") == "1"


def pytest_collection_modifyitems(config, items):
    if gpu_enabled(config):
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=GPU_REASON))


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def dev(request):
    return oxide.device(request.param)
