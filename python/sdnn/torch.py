"""sdnn for PyTorch models: modules that run sdnn's layers, and `convert`, which swaps the pruned
nn.Linear and nn.Conv2d modules of a model for them where that is faster.

Inference only: a backward through these modules raises RuntimeError. The modules keep `weight`
and `bias` as buffers under the same names as nn.Linear / nn.Conv2d, so `state_dict` and
`load_state_dict` work (loading rebuilds the device layer).
"""

import copy

import torch

from . import Conv2d as _Conv2d
from . import Linear as _Linear
from . import _raw_stream, analyze

__all__ = ["SparseLinear", "SparseConv2d", "convert", "report"]


class _NoBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return y

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("sdnn modules run inference only: backward is not implemented for sdnn.torch modules "
                           "(keep the nn.Linear / nn.Conv2d for training, convert afterwards)")


def _guard(x, y):
    if torch.is_grad_enabled() and x.requires_grad:
        return _NoBackward.apply(x, y)
    return y


class SparseLinear(torch.nn.Module):
    """nn.Linear's computation (and an optional fused ReLU) through sdnn.Linear on x's CUDA stream.

    Inputs of any leading shape (..., in_features), of the module's dtype, on its device; a
    non-contiguous input is copied first (x.contiguous()).
    """

    def __init__(self, weight, bias=None, relu=False, dtype=torch.bfloat16, device=None):
        super().__init__()
        if dtype not in (torch.bfloat16, torch.float16):
            raise TypeError(f"SparseLinear: dtype must be torch.bfloat16 or torch.float16, got {dtype}")
        device = torch.device(device if device is not None else weight.device)
        if device.type != "cuda":
            raise ValueError(f"SparseLinear: runs on a CUDA device, got {device}")
        self.relu = bool(relu)
        self.register_buffer("weight", weight.detach().to(device=device, dtype=dtype).contiguous())
        self.register_buffer("bias", None if bias is None else bias.detach().to(device=device, dtype=torch.float32))
        self._build()

    def _build(self):
        with torch.cuda.device(self.weight.device):
            self._impl = _Linear(self.weight, self.bias, relu=self.relu)
        self.in_features, self.out_features = self._impl.in_features, self._impl.out_features
        self._run = self._impl._impl.forward_ptr  # the checked fast path below calls it directly
        self._index = self.weight.get_device()
        # Per batch size: does sdnn's plan run dense cuBLAS there? Then torch's own F.linear runs
        # the same product with less host work (its bias rounded to the weight type first).
        self._dense_at = {}
        self._planned = 0  # the largest batch planned (the plan covers every smaller one)
        self._bias_t = None if self.bias is None else self.bias.to(self.weight.dtype)

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._build()

    def plan(self, batch):
        """Plans for every batch up to `batch` rows (may synchronise; forward plans when it must)."""
        self._impl.plan(batch)
        self._planned = max(self._planned, int(batch))

    def explain(self, rows):
        return self._impl.explain(rows)

    def forward(self, x):
        x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        if x2.dtype is not self.weight.dtype:
            raise TypeError(f"SparseLinear: x is {x.dtype}, the module runs {self.weight.dtype} (cast with x.to(...))")
        if not x2.is_cuda or x2.get_device() != self._index:
            raise ValueError(f"SparseLinear: x is on {x.device}, the module on {self.weight.device}")
        if x2.shape[1] != self.in_features:
            raise ValueError(f"SparseLinear: x has {x2.shape[1]} features, the module takes {self.in_features}")
        rows = x2.shape[0]
        dense = self._dense_at.get(rows)
        if dense is None and rows:
            if rows > self._planned:
                self.plan(rows)
            dense = self._dense_at[rows] = _path_of(self._impl.explain(rows)) == "cublas_dense"
        if dense:
            y = torch.nn.functional.linear(x2, self.weight, self._bias_t)
            if self.relu:
                y = torch.relu_(y)
        else:
            y = torch.empty((rows, self.out_features), dtype=x2.dtype, device=x2.device)
            if rows:
                self._run(x2.data_ptr(), y.data_ptr(), rows, _raw_stream(self._index))
        if x.dim() != 2:
            y = y.reshape(*x.shape[:-1], self.out_features)
        return _guard(x, y)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, relu={self.relu}, " \
               f"dtype={self.weight.dtype}"


class SparseConv2d(torch.nn.Module):
    """nn.Conv2d's computation (groups = 1, zero padding) through sdnn.Conv2d on x's CUDA stream.

    Activations are NHWC in memory: an input that is not torch.channels_last is converted (a
    copy); the output is channels_last, of shape N x K x OH x OW as nn.Conv2d's.
    """

    def __init__(self, conv, dtype=torch.float16, device=None, relu=False):
        super().__init__()
        if dtype not in (torch.bfloat16, torch.float16):
            raise TypeError(f"SparseConv2d: dtype must be torch.bfloat16 or torch.float16, got {dtype}")
        if conv.groups != 1 or conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("SparseConv2d: takes groups = 1, zero padding given as numbers "
                             f"(got groups={conv.groups}, padding={conv.padding!r}, mode={conv.padding_mode!r})")
        device = torch.device(device if device is not None else conv.weight.device)
        if device.type != "cuda":
            raise ValueError(f"SparseConv2d: runs on a CUDA device, got {device}")
        self.stride, self.padding, self.dilation = tuple(conv.stride), tuple(conv.padding), tuple(conv.dilation)
        self.relu = bool(relu)
        self.register_buffer("weight", conv.weight.detach().to(device=device, dtype=dtype).contiguous())
        self.register_buffer("bias", None if conv.bias is None else
                             conv.bias.detach().to(device=device, dtype=torch.float32))
        self._build()

    def _build(self):
        with torch.cuda.device(self.weight.device):
            self._impl = _Conv2d(self.weight, self.bias, self.stride, self.padding, self.dilation, relu=self.relu)
        self._shapes = set()  # (N, H, W) the layer has planned for

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._build()

    def explain(self, batch, H, W):
        return self._impl.explain(batch, H, W)

    def forward(self, x):
        self._shapes.add((int(x.shape[0]), int(x.shape[2]), int(x.shape[3])))
        xc = x if x.is_contiguous(memory_format=torch.channels_last) else \
            x.contiguous(memory_format=torch.channels_last)
        return _guard(x, self._impl(xc))

    def extra_repr(self):
        return f"{self._impl.in_channels}, {self._impl.out_channels}, kernel_size={tuple(self.weight.shape[2:])}, " \
               f"stride={self.stride}, padding={self.padding}, dtype={self.weight.dtype}"


def _path_of(reason):
    """The path a plan's reason names: it reads "N = <n>: <path> (...)"."""
    return reason.split(": ", 1)[1].split(" ", 1)[0]


def _density(w):
    return float(torch.count_nonzero(w).item()) / max(1, w.numel())


def convert(model, dtype=torch.bfloat16, device=None, batch_sizes=(1, 32, 1024), max_density=0.5, inplace=False,
            example_input=None):
    """A copy of `model` (or the model itself with inplace=True) in which each nn.Linear and
    nn.Conv2d whose weights are at most `max_density` nonzero runs through sdnn, in `dtype`.

    A Linear is planned at `batch_sizes` (rows); where the plan runs dense cuBLAS at every one of
    them, the dense nn.Linear is kept (cast to dtype): sdnn would only add a call. A Conv2d's plan
    needs its input's size: with `example_input` (one batch of the model's input) each Conv2d is
    planned at the size it sees in that forward, and where the plan picks cuDNN the nn.Conv2d is
    kept (torch calls cuDNN with less host work than sdnn's cuDNN path). Without it, a Conv2d is
    converted and planned at its first forward. Denser layers stay dense. The rest of the model is cast to `dtype`
    and moved to `device` (default: the current CUDA device). `report(model)` lists what each
    layer became and why. Prune first (sdnn.prune, or torch.nn.utils.prune made permanent).
    """
    if not inplace:
        model = copy.deepcopy(model)
    device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    model = model.to(device=device, dtype=dtype)
    entries = []
    conv_inputs = {}  # name -> the input shape each Conv2d saw in example_input's forward
    if example_input is not None:
        hooks = [m.register_forward_hook(lambda mod, inp, out, name=name: conv_inputs.__setitem__(name, inp[0].shape))
                 for name, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)]
        try:
            with torch.no_grad():
                model(example_input.to(device=device, dtype=dtype))
        finally:
            for h in hooks:
                h.remove()

    def visit(parent, prefix):
        for name, child in list(parent.named_children()):
            full = f"{prefix}.{name}" if prefix else name
            if isinstance(child, torch.nn.Linear):
                d = _density(child.weight)
                if d > max_density:
                    entries.append((full, "dense nn.Linear", f"{d:.1%} nonzero (> max_density {max_density:.0%})"))
                    continue
                s = SparseLinear(child.weight, child.bias, dtype=dtype, device=device)
                s.plan(max(batch_sizes))  # one plan covers every batch up to its size
                reasons = [s.explain(n) for n in batch_sizes]
                if all(_path_of(r) == "cublas_dense" for r in reasons):
                    entries.append((full, "dense nn.Linear", "sdnn's plan runs cuBLAS dense at every batch size: "
                                    + "; ".join(reasons)))
                    continue
                setattr(parent, name, s)
                entries.append((full, "sdnn SparseLinear", f"{analyze(child.weight)['description']}; "
                                + "; ".join(reasons)))
            elif isinstance(child, torch.nn.Conv2d):
                d = _density(child.weight)
                ok = child.groups == 1 and child.padding_mode == "zeros" and not isinstance(child.padding, str)
                if d > max_density or not ok:
                    why = f"{d:.1%} nonzero (> max_density {max_density:.0%})" if ok else \
                        "groups, string padding or a padding mode sdnn does not take"
                    entries.append((full, "dense nn.Conv2d", why))
                    continue
                s = SparseConv2d(child, dtype=dtype, device=device)
                if full in conv_inputs:
                    shape = tuple(conv_inputs[full])
                    with torch.no_grad():
                        s(torch.zeros(shape, dtype=dtype, device=device).contiguous(memory_format=torch.channels_last))
                    why = s.explain(shape[0], shape[2], shape[3])
                    if why.split(": ")[1] == "cudnn":
                        entries.append((full, "dense nn.Conv2d", f"sdnn's plan at {shape} picks cuDNN: {why}"))
                        continue
                    entries.append((full, "sdnn SparseConv2d", f"{d:.1%} nonzero; at {shape}: {why}"))
                else:
                    entries.append((full, "sdnn SparseConv2d",
                                    f"{d:.1%} nonzero; cuDNN or sdnn chosen per input size at the first forward"))
                setattr(parent, name, s)
            else:
                visit(child, full)

    visit(model, "")
    model._sdnn_report = entries
    return model


def report(model):
    """What convert() made of each layer, one line per layer, and for each SparseConv2d that has
    run, the plan it chose per input shape."""
    lines = [f"{name}: {kind} - {why}" for name, kind, why in getattr(model, "_sdnn_report", [])]
    for name, m in model.named_modules():
        if isinstance(m, SparseConv2d):
            for (n, h, w) in sorted(m._shapes):
                lines.append(f"{name} at N={n}, {h}x{w}: {m.explain(n, h, w)}")
    return "\n".join(lines)
