"""The Sparse DNN Graph Challenge from Python: Y_l = min(max(Y_{l-1} W_l + bias, 0), cap) over the
layers, then the categories (the 1-based ids of the inputs whose final row is not all zero).

Layers and inputs are sdnn.CSR (or anything sdnn.from_scipy takes): the official TSV files
(read_layer, read_images), the generated networks (official_1024_layer reproduces the official
1024-neuron network; radixnet_layer the other sizes) and inputs made from MNIST digits. `infer`
runs the depth-first engine on the GPU (exact: the same categories as the host reference, which
`infer(..., device="cpu")` runs).
"""

import numpy as np

from . import CSR, _sdnn, from_scipy

__all__ = ["infer", "bias", "official_1024_layer", "official_1024_network", "radixnet_layer", "read_layer",
           "read_images", "mnist_inputs"]


def _csr(m, what):
    if isinstance(m, CSR):
        return m
    if hasattr(m, "tocsr"):
        return from_scipy(m)
    raise TypeError(f"{what}: expected an sdnn.CSR or a scipy.sparse matrix, got {type(m).__name__}")


def bias(neurons):
    """The challenge's bias for a network of `neurons` (-0.3, -0.35, -0.4, -0.45 for 1024 ... 65536)."""
    return _sdnn.challenge_bias(int(neurons))


def official_1024_layer(layer):
    """Layer `layer` (0-based) of the official 1024-neuron network, reproduced from shipped tables."""
    return _sdnn.challenge_official_1024_layer(int(layer))


def official_1024_network(layers=120):
    return [official_1024_layer(l) for l in range(int(layers))]


def radixnet_layer(neurons, layer, seed=1):
    """A RadiX-Net layer of the challenge's construction for `neurons` (seeded permutations)."""
    return _sdnn.challenge_radixnet_layer(int(neurons), int(layer), int(seed))


def read_layer(path, neurons):
    """An official layer file (TSV 'row col value', 1-based; plain or .gz)."""
    return _sdnn.challenge_read_layer(str(path), int(neurons))


def read_images(path, neurons, images=-1):
    """An official input file (TSV 'image pixel value'); images=-1 reads them all."""
    return _sdnn.challenge_read_images(str(path), int(neurons), int(images))


def mnist_inputs(idx_path, neurons, count, threshold=0.7):
    """`count` challenge inputs from an MNIST IDX image file (resized to sqrt(N) x sqrt(N), thresholded)."""
    return _sdnn.challenge_mnist_inputs(str(idx_path), int(neurons), int(count), float(threshold))


def infer(layers, inputs, bias_value=None, cap=32.0, device="cuda", stream=None, details=False):
    """The categories of `inputs` through `layers`, as an int32 NumPy array (ascending, 1-based).

    device="cuda": the depth-first engine on the current CUDA device (it plans on the layers,
    then runs; it reads the categories back, so the stream is synchronised). device="cpu": the
    host reference (slow; the oracle). bias_value defaults to the challenge's bias for N. With
    details=True returns (categories, info) where info has the plan and run times (host wall,
    seconds) and the plan's summary of what it proved.
    """
    layers = [_csr(m, f"layers[{i}]") for i, m in enumerate(layers)]
    inputs = _csr(inputs, "inputs")
    if not layers:
        raise ValueError("infer: needs at least one layer")
    n = layers[0].shape[0]
    for i, m in enumerate(layers):
        if m.shape != (n, n):
            raise ValueError(f"infer: layer {i} is {m.shape[0]} x {m.shape[1]}; every layer must be N x N with one N "
                             f"({n})")
    if inputs.shape[1] != n:
        raise ValueError(f"infer: the inputs have {inputs.shape[1]} columns, the network {n} neurons")
    b = bias(n) if bias_value is None else float(bias_value)
    if device == "cpu":
        cats = np.asarray(_sdnn.challenge_reference(layers, inputs, b, float(cap)), dtype=np.int32)
        return (cats, {}) if details else cats
    if device not in ("cuda", "gpu"):
        raise ValueError(f"infer: device must be 'cuda' or 'cpu', got {device!r}")
    if stream is None:
        try:
            import torch  # torch's current stream, where torch is there
            stream = torch.cuda.current_stream().cuda_stream
        except ImportError:
            stream = 0  # the legacy default stream
    elif not isinstance(stream, int):
        stream = stream.cuda_stream
    info = _sdnn.challenge_device(layers, inputs, b, float(cap), int(stream))
    cats = np.asarray(info.pop("categories"), dtype=np.int32)
    return (cats, info) if details else cats
