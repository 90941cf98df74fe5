"""What the Python examples share: the device they run on (the GPU when
PyTorch and Oxide both see one, else the CPU: Oxide's embedded CPU backend
with torch CPU tensors) and the kernel files next to them."""
import os
import sys

import torch

import oxide

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.dirname(HERE)


def pick_device():
    """("cuda" or "cpu", the oxide.Device)."""
    if torch.cuda.is_available() and oxide.device_count("cuda") > 0:
        return "cuda", oxide.device("cuda")
    return "cpu", oxide.device("cpu")


def kernel_file(name):
    return os.path.join(EXAMPLES, name)


def finish(name, ok, detail=""):
    print(f"{name}: {'PASSED' if ok else 'FAILED'}{' (' + detail + ')' if detail else ''}")
    sys.exit(0 if ok else 1)
