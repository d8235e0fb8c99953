"""sdnn from Python: structured-sparse layers on the tensor cores.

Arrays cross into the compiled module through DLPack without a copy (torch tensors, NumPy and
CuPy arrays); results come back in the caller's array library (a torch tensor for torch input, a
NumPy array for NumPy input). Device layers run on the caller's CUDA stream (torch's current
stream unless `stream=` is given), release the GIL while they enqueue, and never synchronise,
except where a plan is made (the first call at a new batch size), which times the candidate
kernels on this GPU. `sdnn.torch.convert` swaps the pruned layers of a torch model for these.
"""

from . import _sdnn
from ._sdnn import CSR, BlockSparse, CudaError, Error, Sparse24, has_cuda

__version__ = "0.1.0"
__all__ = [
    "Error", "CudaError", "has_cuda", "analyze", "prune", "CSR", "BlockSparse", "Sparse24", "to_csr",
    "from_scipy", "block_sparse", "sparse24", "to_dense", "linear_reference", "Linear", "Conv2d",
]

STRUCTURES = ("unstructured", "blocks", "2:4")


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _host(x):
    """A host array the compiled module can read through DLPack (a copy only where it must be:
    a CUDA tensor, a tensor that requires grad, a non-contiguous or read-only array)."""
    if _is_torch(x):
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        return x.contiguous()
    import numpy as np
    if not hasattr(x, "__dlpack__"):
        x = np.asarray(x)
        if x.dtype.kind not in "fiub":
            raise TypeError(f"expected a numeric array (torch.Tensor, numpy.ndarray, ...), got {x.dtype} data")
    if isinstance(x, np.ndarray) and (not x.flags.writeable or not x.flags.c_contiguous):
        x = np.array(x, order="C", copy=True)  # DLPack cannot carry a read-only flag
    return x


def _empty(like, shape, dtype=None):
    """An uninitialised host array of the library of `like` (torch or NumPy)."""
    if _is_torch(like):
        import torch
        return torch.empty(shape, dtype=like.dtype if dtype is None else dtype)
    import numpy as np
    return np.empty(shape, dtype=like.dtype if dtype is None else dtype)


def _back(result, like):
    """The result on the device of the original input (torch only)."""
    if _is_torch(like) and like.device.type != "cpu":
        return result.to(like.device)
    return result


def analyze(weight):
    """The structure sdnn's automatic choice reads from a weight matrix (out x in): nonzeros,
    density, occupied 32x32 blocks and 64x64 tiles, and whether it is 2:4 along its rows."""
    return _sdnn.analyze(_host(weight))


def prune(weight, structure="unstructured", sparsity=0.9, block=(32, 32)):
    """The weight with the smallest entries set to zero, by magnitude within `structure`:
    "unstructured" (round(sparsity * size) entries), "blocks" (the blocks of `block` shape with
    the smallest L2 norm, round(sparsity * blocks) of them) or "2:4" (the two smallest of every
    aligned group of four along a row; `sparsity` is ignored). Deterministic: ties go to the
    lower index. Returns an array of the input's library, type, shape and device."""
    w = _host(weight)
    if getattr(w, "ndim", 0) != 2:
        raise ValueError(f"prune: expected a 2-D weight (out x in), got shape {tuple(w.shape)}")
    out = _empty(w, tuple(w.shape))
    if structure == "unstructured":
        _sdnn.prune_magnitude(w, out, float(sparsity))
    elif structure == "blocks":
        br, bc = block
        _sdnn.prune_blocks(w, out, int(br), int(bc), float(sparsity))
    elif structure == "2:4":
        _sdnn.prune_24(w, out)
    else:
        raise ValueError(f"prune: structure must be one of {STRUCTURES}, got {structure!r}")
    return _back(out, weight)


def to_csr(weight):
    """sdnn.CSR (float32 values, int32 indices) of a dense float32 matrix."""
    return CSR.from_dense(_host(weight))


def from_scipy(m):
    """sdnn.CSR of a scipy.sparse matrix (converted to CSR, float32, int32 indices); validated:
    a malformed matrix raises sdnn.Error."""
    import numpy as np
    m = m.tocsr()
    if m.shape[0] >= 2**31 or m.shape[1] >= 2**31 or m.nnz >= 2**31:
        raise ValueError(f"from_scipy: {m.shape} with {m.nnz} nonzeros does not fit int32 indices")
    return CSR.from_arrays(m.shape[0], m.shape[1], np.ascontiguousarray(m.indptr, dtype=np.int32),
                           np.ascontiguousarray(m.indices, dtype=np.int32),
                           np.ascontiguousarray(m.data, dtype=np.float32))


def to_scipy(csr):
    """scipy.sparse.csr_matrix of an sdnn.CSR (copies)."""
    import numpy as np
    import scipy.sparse
    rows, cols = csr.shape
    indptr = np.empty(rows + 1, np.int32)
    indices = np.empty(csr.nnz, np.int32)
    data = np.empty(csr.nnz, np.float32)
    csr.export_arrays(indptr, indices, data)
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(rows, cols))


def block_sparse(weight, block=(32, 32)):
    """sdnn.BlockSparse of a dense matrix: the blocks of `block` shape holding a nonzero."""
    return BlockSparse.from_dense(_host(weight), int(block[0]), int(block[1]))


def sparse24(weight, prune=False):
    """sdnn.Sparse24 (values + 2-bit positions) of a matrix that is 2:4 along its rows; with
    prune=True the two largest magnitudes of every group are kept instead of refusing."""
    return Sparse24.from_dense(_host(weight), bool(prune))


def to_dense(m, like=None):
    """The dense matrix of an sdnn.BlockSparse or sdnn.Sparse24, as a torch tensor when `like`
    is one (or torch is asked for with like="torch") and a NumPy array otherwise. bfloat16 has no
    NumPy type: such a matrix comes back as torch."""
    rows, cols = m.shape
    want_torch = like == "torch" or (like is not None and _is_torch(like)) or m.dtype == "bfloat16"
    if want_torch:
        import torch
        out = torch.empty((rows, cols), dtype=getattr(torch, m.dtype))
    else:
        import numpy as np
        out = np.empty((rows, cols), dtype=np.dtype(m.dtype))
    m.to_dense(out)
    return out


def linear_reference(x, weight, bias=None, relu=False):
    """The host reference of a 16-bit linear layer: epi(x weight^T) with float accumulation, a
    float32 bias and ReLU, one rounding to the input type. The device layers are tested against it."""
    xs, ws = _host(x), _host(weight)
    bs = None if bias is None else _host(bias)
    out = _empty(xs, (xs.shape[0], ws.shape[0]))
    _sdnn.linear_reference(xs, ws, bs, bool(relu), out)
    return _back(out, x)


def _raw_stream(device_index):
    """torch's current stream on a device, as an int (cudaStream_t): through torch's raw getter
    where it has one (no Stream object made: a few microseconds less per call)."""
    import torch
    getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if getter is not None:
        return getter(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


def _float_bias(bias):
    """A bias as a contiguous float32 host array of its library (None stays None)."""
    if bias is None:
        return None
    b = _host(bias)
    if _is_torch(b):
        import torch
        return b.to(torch.float32)
    import numpy as np
    return np.ascontiguousarray(b, dtype=np.float32)


def _stream_of(device_index, stream):
    import torch
    if stream is None:
        return _raw_stream(device_index)
    if isinstance(stream, int):
        return stream
    if isinstance(stream, torch.cuda.Stream):
        if stream.device.index != device_index:
            raise ValueError(f"stream: the layer lives on cuda:{device_index}, the stream on {stream.device}")
        return stream.cuda_stream
    raise TypeError(f"stream: expected a torch.cuda.Stream or an int (cudaStream_t), got {type(stream).__name__}")


class Linear:
    """y = epi(x W^T) on the tensor cores, W pruned (or not) and stored as bfloat16 or float16.

    The automatic plan reads W's structure and picks, per batch size, dense cuBLAS or one of
    sdnn's sparse tensor-core kernels (32x32 blocks, 64x64 tiles of nonzeros, 2:4); explain(n)
    says which and why. W and the bias are copied to the device (the Linear keeps them alive).
    The plan is made on the current CUDA device, at the first call (or plan()), and again when a
    batch exceeds the planned one; making it may synchronise. Runs only enqueue.
    """

    def __init__(self, weight, bias=None, relu=False, max_rows=0):
        w = _host(weight)
        b = _float_bias(bias)
        self._impl = _sdnn.Linear(w, b, bool(relu), int(max_rows))
        self.in_features = self._impl.in_features
        self.out_features = self._impl.out_features
        self.dtype = self._impl.dtype
        self.device = self._impl.device
        self._torch_dtype = _torch_dtype(self.dtype)

    def plan(self, batch, stream=None):
        self._impl.plan(int(batch), _stream_of(self.device, stream))

    def explain(self, rows):
        """What a batch of `rows` runs and why (after the plan for that size exists)."""
        return self._impl.reason(int(rows))

    def __call__(self, x, out=None, stream=None):
        import torch
        if not isinstance(x, torch.Tensor):
            if out is None:
                raise TypeError("Linear: for a non-torch array, pass `out` (an array of the output's shape)")
            self._impl.forward(x, out, _stream_of(self.device, stream))
            return out
        if x.dtype is not self._torch_dtype:
            raise TypeError(f"Linear: x is {x.dtype}, the layer takes torch.{self.dtype} (cast with x.to(...))")
        if not x.is_cuda or x.get_device() != self.device:
            raise ValueError(f"Linear: x is on {x.device}, the layer on cuda:{self.device}")
        if x.dim() != 2 or x.shape[1] != self.in_features:
            raise ValueError(f"Linear: x must be rows x {self.in_features}, got {tuple(x.shape)}")
        if not x.is_contiguous():
            raise ValueError("Linear: x is not contiguous; pass x.contiguous()")
        if out is None:
            out = torch.empty((x.shape[0], self.out_features), dtype=x.dtype, device=x.device)
        elif (out.dtype != x.dtype or out.device != x.device or tuple(out.shape) != (x.shape[0], self.out_features)
              or not out.is_contiguous()):
            raise ValueError(f"Linear: out must be a contiguous {x.dtype} tensor of shape "
                             f"{(x.shape[0], self.out_features)} on {x.device}")
        self._impl.forward_ptr(x.data_ptr(), out.data_ptr(), x.shape[0], _stream_of(self.device, stream))
        return out


def _torch_dtype(name):
    try:
        import torch
    except ImportError:
        return None
    return getattr(torch, name)


def _pair(v, what):
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(e) for e in v)
    if len(v) != 2:
        raise ValueError(f"Conv2d: {what} must be an int or a pair, got {v}")
    return v


class Conv2d:
    """A 2-D convolution (+ bias, ReLU, 2x2 max-pool) on NHWC activations in bfloat16 or float16.

    weight: K x C x R x S (torch's layout). Per (batch, H, W) the automatic plan times cuDNN
    (its best algorithm) and each structured tensor-core path the filter allows on this GPU and
    keeps the fastest (the first call at a new shape synchronises); explain() says what it chose.
    Inputs: (N, C, H, W) tensors in torch.channels_last memory (or (N, H, W, C) arrays with `out`).
    """

    def __init__(self, weight, bias=None, stride=1, padding=0, dilation=1, relu=False, pool=False):
        w = _host(weight)
        if w.ndim != 4:
            raise ValueError(f"Conv2d: the weight must be K x C x R x S, got shape {tuple(w.shape)}")
        K, C, R, S = (int(d) for d in w.shape)
        if _is_torch(w):
            wg = w.permute(0, 2, 3, 1).contiguous().reshape(K, R * S * C)
        else:
            import numpy as np
            wg = np.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(K, R * S * C)
        b = _float_bias(bias)
        self._impl = _sdnn.Conv2d(wg, C, R, S, _pair(stride, "stride"), _pair(padding, "padding"),
                                  _pair(dilation, "dilation"), b, bool(relu), bool(pool))
        self.in_channels, self.out_channels = C, K
        self.dtype = self._impl.dtype
        self.device = self._impl.device
        self._torch_dtype = _torch_dtype(self.dtype)

    def explain(self, batch, H, W):
        return self._impl.reason(int(batch), int(H), int(W))

    def __call__(self, x, out=None, stream=None):
        import torch
        if not isinstance(x, torch.Tensor):
            if out is None:
                raise TypeError("Conv2d: for a non-torch array, pass `out` (an N x OH x OW x K array)")
            self._impl.forward(x, out, _stream_of(self.device, stream))
            return out
        if x.dtype is not self._torch_dtype:
            raise TypeError(f"Conv2d: x is {x.dtype}, the layer takes torch.{self.dtype} (cast with x.to(...))")
        if x.device.type != "cuda" or x.device.index != self.device:
            raise ValueError(f"Conv2d: x is on {x.device}, the layer on cuda:{self.device}")
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"Conv2d: x must be N x {self.in_channels} x H x W, got {tuple(x.shape)}")
        if not x.is_contiguous(memory_format=torch.channels_last):
            raise ValueError("Conv2d: x must be in NHWC memory; pass x.contiguous(memory_format=torch.channels_last)")
        N, _, H, W = x.shape
        OH, OW = self._impl.out_hw(H, W)
        if out is None:
            out = torch.empty((N, self.out_channels, OH, OW), dtype=x.dtype, device=x.device,
                              memory_format=torch.channels_last)
        elif (tuple(out.shape) != (N, self.out_channels, OH, OW) or out.dtype != x.dtype or out.device != x.device
              or not out.is_contiguous(memory_format=torch.channels_last)):
            raise ValueError(f"Conv2d: out must be a channels_last {x.dtype} tensor of shape "
                             f"{(N, self.out_channels, OH, OW)} on {x.device}")
        self._impl.forward_ptr(x.data_ptr(), out.data_ptr(), N, H, W, _stream_of(self.device, stream))
        return out


from . import challenge  # noqa: E402  (uses the names above)
