# Marks: `gpu` tests need torch with CUDA and a module built with its device layers. They skip
# without them, unless SDNN_REQUIRE_GPU=1 (the GPU machine), where a missing GPU is a failure.
import os

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU, torch with CUDA and sdnn built with CUDA")


def _gpu_missing():
    try:
        import sdnn
    except ImportError as e:
        return f"sdnn does not import: {e}"
    if not sdnn.has_cuda:
        return "the sdnn module was built without its device layers (SDNN_PYTHON_CUDA=OFF)"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def pytest_collection_modifyitems(config, items):
    missing = _gpu_missing()
    if missing is None:
        return
    require = os.environ.get("SDNN_REQUIRE_GPU") == "1"
    for item in items:
        if "gpu" in item.keywords:
            if require:
                item.add_marker(pytest.mark.usefixtures("_gpu_required"))
            else:
                item.add_marker(pytest.mark.skip(reason=missing))


@pytest.fixture
def _gpu_required():
    pytest.fail(f"SDNN_REQUIRE_GPU=1 but {_gpu_missing()}")
