# Device tests of the Python package (marked gpu): sdnn.Linear and sdnn.Conv2d against the host
# reference and torch computed on the same rounded inputs, on torch's current stream and on
# another stream, the DLPack path, sdnn.torch.convert on an MLP and a small CNN, and bad input.
import numpy as np
import pytest

import sdnn

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
import sdnn.torch  # noqa: E402  (needs torch)

TYPES = [torch.bfloat16, torch.float16]
EPS = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}  # half an ulp, relative


def seeded(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def within_one_rounding(y, ref, mag, k, dtype):
    """|y - ref| <= one rounding of the output (eps |ref|) plus float accumulation over k terms
    (k 2^-24 sum |x w|) plus the output rounding of a value near zero."""
    y, ref, mag = y.double().cpu(), ref.double().cpu(), mag.double().cpu()
    bound = ref.abs() * 2 * EPS[dtype] + mag * k * 2.0**-24 + 2.0**-24
    bad = (y - ref).abs() > bound
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} outside the bound; worst {(y - ref).abs().max()}"


def weights(kind, m, k, dtype, seed):
    w = seeded(m, k, seed=seed)
    if kind == "dense":
        p = w
    elif kind == "blocks":
        p = sdnn.prune(w, "blocks", 0.9, (32, 32))
    elif kind == "2:4":
        p = sdnn.prune(w, "2:4")
    else:
        p = sdnn.prune(w, "unstructured", 0.9)
    return p.to(dtype)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("kind", ["dense", "blocks", "2:4", "unstructured"])
@pytest.mark.parametrize("rows", [1, 8, 130])
def test_linear_matches_the_host_reference(dtype, kind, rows):
    m, k = 256, 320
    w = weights(kind, m, k, dtype, seed=rows)
    b = seeded(m, seed=99)
    x = seeded(rows, k, seed=rows + 1, dtype=dtype)
    lin = sdnn.Linear(w, b, relu=True)
    y = lin(x.cuda())
    torch.cuda.synchronize()
    assert y.dtype == dtype and y.shape == (rows, m) and y.is_cuda
    ref = sdnn.linear_reference(x, w, b, relu=True)  # the same rounded inputs
    mag = x.double().abs() @ w.double().abs().T + b.double().abs()
    within_one_rounding(y, ref.double(), mag, k, dtype)
    assert lin.explain(rows).startswith(f"N = {rows}: ")


def test_linear_on_another_stream_and_through_dlpack():
    dtype = torch.bfloat16
    w = weights("blocks", 128, 256, dtype, seed=3)
    x = seeded(64, 256, seed=4, dtype=dtype).cuda()
    lin = sdnn.Linear(w)
    ref = lin(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y1 = lin(x)  # torch's current stream is s here
    y2 = torch.empty_like(ref)
    lin(x, out=y2, stream=s)
    y3 = torch.empty_like(ref)
    lin._impl.forward(x, y3, s.cuda_stream)  # the DLPack path
    s.synchronize()
    assert torch.equal(y1, ref) and torch.equal(y2, ref) and torch.equal(y3, ref)  # deterministic


def test_linear_bad_input():
    lin = sdnn.Linear(weights("2:4", 64, 128, torch.float16, seed=5))
    x = seeded(4, 128, dtype=torch.float16).cuda()
    with pytest.raises(TypeError, match="float16"):
        lin(x.to(torch.bfloat16))
    with pytest.raises(ValueError, match="cpu"):
        lin(x.cpu())
    with pytest.raises(ValueError, match="rows x 128"):
        lin(x[:, :64].contiguous())
    with pytest.raises(ValueError, match="contiguous"):
        lin(seeded(128, 4, dtype=torch.float16).cuda().T)
    with pytest.raises(ValueError, match="out must be"):
        lin(x, out=torch.empty(4, 63, dtype=torch.float16, device="cuda"))
    with pytest.raises(TypeError):
        lin(x, stream="default")
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        sdnn.Linear(seeded(8, 8))
    with pytest.raises(ValueError, match="shape"):
        sdnn.Linear(seeded(8, 8, dtype=torch.float16), bias=seeded(7))
    y = torch.empty(4, 64, dtype=torch.float16, device="cuda")
    with pytest.raises(TypeError, match="float16"):
        lin._impl.forward(x.to(torch.bfloat16), y, 0)
    with pytest.raises(ValueError, match="expected shape"):
        lin._impl.forward(x, torch.empty(4, 65, dtype=torch.float16, device="cuda"), 0)


def test_linear_outlives_the_user_tensors():
    w = weights("blocks", 128, 128, torch.float16, seed=6).cuda()
    lin = sdnn.Linear(w)
    expect = lin(seeded(2, 128, seed=7, dtype=torch.float16).cuda()).cpu()
    del w
    torch.cuda.empty_cache()
    junk = torch.full((1 << 20,), 7.0, device="cuda")  # reuse the freed memory
    got = lin(seeded(2, 128, seed=7, dtype=torch.float16).cuda()).cpu()
    assert torch.equal(expect, got)
    del junk


def conv_reference(x, w, b, stride, pad, dil, relu):
    """torch's float32 convolution of the same rounded inputs, rounded once to x's type."""
    y = torch.nn.functional.conv2d(x.float().cpu(), w.float().cpu(), b.float().cpu() if b is not None else None,
                                   stride=stride, padding=pad, dilation=dil)
    if relu:
        y = torch.relu(y)
    mag = torch.nn.functional.conv2d(x.float().cpu().abs(), w.float().cpu().abs(), None, stride=stride,
                                     padding=pad, dilation=dil)
    return y, mag


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("case", [
    # C, K, H, W, R, stride, pad, dil, structure
    (64, 64, 14, 14, 3, 1, 1, 1, "blocks"),
    (32, 64, 9, 11, 3, 2, 0, 1, "blocks"),
    (64, 32, 8, 8, 1, 1, 0, 1, "dense"),
    (48, 80, 7, 7, 3, 1, 2, 2, "unstructured"),
])
def test_conv2d_matches_torch(dtype, case):
    C, K, H, W, R, stride, pad, dil, structure = case
    w = seeded(K, C, R, R, seed=C + K)
    if structure != "dense":
        wg = w.permute(0, 2, 3, 1).reshape(K, -1)
        wg = sdnn.prune(wg, "blocks", 0.75, (16, 16)) if structure == "blocks" else \
            sdnn.prune(wg, "unstructured", 0.8)
        w = wg.reshape(K, R, R, C).permute(0, 3, 1, 2).contiguous()
    w = w.to(dtype)
    b = seeded(K, seed=1)
    x = seeded(2, C, H, W, seed=2, dtype=dtype)
    conv = sdnn.Conv2d(w, b, stride=stride, padding=pad, dilation=dil, relu=True)
    y = conv(x.cuda().contiguous(memory_format=torch.channels_last))
    torch.cuda.synchronize()
    ref, mag = conv_reference(x, w, b, stride, pad, dil, True)
    assert y.shape == ref.shape and y.is_contiguous(memory_format=torch.channels_last)
    # The bound of the C++ conv16_auto tests: cuDNN's path may round the convolution before the
    # bias and ReLU (two roundings, the first relative to |conv| <= |y| + |bias|), and its
    # accumulation is bounded as 4096 terms would be (2^-12 of sum |x w|).
    bias = b.double().abs().view(1, -1, 1, 1)
    yd, rd = y.double().cpu(), ref.double()
    tol = 2 * EPS[dtype] * (rd.abs() + bias) + (mag.double() + bias) * 2.0**-12 + 2.0**-24
    bad = (yd - rd).abs() > tol
    assert not bad.any(), f"{int(bad.sum())} of {bad.numel()} outside the bound; worst {(yd - rd).abs().max()}"
    assert conv.explain(2, H, W)


def test_conv2d_bad_input():
    conv = sdnn.Conv2d(seeded(16, 16, 3, 3, dtype=torch.float16), padding=1)
    x = seeded(1, 16, 8, 8, dtype=torch.float16).cuda()
    with pytest.raises(ValueError, match="channels_last"):
        conv(x)  # NCHW memory
    xl = x.contiguous(memory_format=torch.channels_last)
    with pytest.raises(TypeError, match="float16"):
        conv(xl.to(torch.bfloat16))
    with pytest.raises(ValueError, match="N x 16"):
        conv(seeded(1, 8, 8, 8, dtype=torch.float16).cuda().contiguous(memory_format=torch.channels_last))
    with pytest.raises(ValueError, match="K x C x R x S"):
        sdnn.Conv2d(seeded(16, 16, dtype=torch.float16))
    with pytest.raises(sdnn.Error):
        sdnn.Conv2d(seeded(16, 16, 3, 3, dtype=torch.float16), stride=0)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 1024)
        self.fc2 = torch.nn.Linear(1024, 1024)
        self.out = torch.nn.Linear(1024, 10)

    def forward(self, x):
        return self.out(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(1, 32, 3, padding=1)
        self.c2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.c3 = torch.nn.Conv2d(64, 128, 3, padding=1)
        self.fc = torch.nn.Linear(128 * 7 * 7, 10)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.max_pool2d(torch.relu(self.c2(x)), 2)
        x = torch.max_pool2d(torch.relu(self.c3(x)), 2)
        return self.fc(x.flatten(1))


def prune_model(model, structure):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and m.out_features > 10:
                m.weight.copy_(sdnn.prune(m.weight, structure, 0.9, (32, 32)))
            elif isinstance(m, torch.nn.Conv2d) and m.in_channels >= 32:
                K, C, R, S = m.weight.shape
                wg = m.weight.permute(0, 2, 3, 1).reshape(K, -1)
                wg = sdnn.prune(wg, structure, 0.75, (16, 16))
                m.weight.copy_(wg.reshape(K, R, S, C).permute(0, 3, 1, 2))
    return model


@pytest.mark.parametrize("structure", ["blocks", "2:4"])
def test_convert_mlp_end_to_end(structure):
    torch.manual_seed(0)
    dense = prune_model(MLP(), structure).cuda().to(torch.bfloat16).eval()
    conv = sdnn.torch.convert(dense, dtype=torch.bfloat16)
    rep = sdnn.torch.report(conv)
    assert "fc1" in rep and "fc2" in rep and "out: dense nn.Linear" in rep
    x = torch.randn(64, 784, device="cuda").to(torch.bfloat16)
    with torch.no_grad():
        want, got = dense(x).float(), conv(x).float()
    # Two bf16 models that round their hidden layers independently: agree to a few bf16 ulps.
    assert torch.allclose(got, want, rtol=0.05, atol=0.05 * want.abs().max().item())
    # state_dict round trip: a fresh converted copy loads the weights and gives the same result
    again = sdnn.torch.convert(MLP(), dtype=torch.bfloat16, max_density=1.0)
    again.load_state_dict(conv.state_dict())
    with torch.no_grad():
        assert torch.equal(again(x), conv(x)) or torch.allclose(again(x).float(), got, rtol=0.02, atol=1e-2)


def test_convert_cnn_end_to_end_and_backward_refused():
    torch.manual_seed(1)
    dense = prune_model(CNN(), "blocks").cuda().to(torch.float16).eval()
    conv = sdnn.torch.convert(dense, dtype=torch.float16)
    x = torch.randn(8, 1, 28, 28, device="cuda").to(torch.float16)
    with torch.no_grad():
        want, got = dense(x).float(), conv(x).float()
    assert torch.allclose(got, want, rtol=0.05, atol=0.05 * want.abs().max().item())
    assert "SparseConv2d" in sdnn.torch.report(conv)
    layer = next(m for m in conv.modules() if isinstance(m, sdnn.torch.SparseConv2d))
    xg = torch.randn(2, layer.weight.shape[1], 14, 14, device="cuda", dtype=torch.float16, requires_grad=True)
    y = layer(xg)
    with pytest.raises(RuntimeError, match="inference only"):
        y.float().sum().backward()
    # planned at convert time from an example input: a layer whose plan picks cuDNN stays nn.Conv2d
    planned = sdnn.torch.convert(dense, dtype=torch.float16, example_input=x)
    rep = sdnn.torch.report(planned)
    assert "c2:" in rep and "c3:" in rep and "at (8," in rep
    for name in ("c2", "c3"):
        kept = isinstance(getattr(planned, name), torch.nn.Conv2d)
        assert kept == ("picks cuDNN" in rep.split(f"{name}:")[1].split("\n")[0])
    with torch.no_grad():
        assert torch.allclose(planned(x).float(), want, rtol=0.05, atol=0.05 * want.abs().max().item())


def test_sparse_linear_module_any_leading_shape_and_empty_batch():
    dtype = torch.bfloat16
    w = weights("blocks", 64, 128, dtype, seed=8)
    m = sdnn.torch.SparseLinear(w.cuda(), None, dtype=dtype)
    x = seeded(2, 3, 128, seed=9, dtype=dtype)
    with torch.no_grad():
        y = m(x.cuda())
        empty = m(x[:0].cuda())
    assert y.shape == (2, 3, 64) and empty.shape == (0, 3, 64)
    ref = sdnn.linear_reference(x.reshape(6, 128), w)
    within_one_rounding(y.reshape(6, 64), ref.double(), x.reshape(6, 128).double().abs() @ w.double().abs().T, 128,
                        dtype)
    with pytest.raises(TypeError, match="cast"):
        m(x.cuda().half())


def test_challenge_engine_matches_the_official_categories():
    from pathlib import Path
    data = Path(__file__).resolve().parents[2] / "tests" / "data"
    inputs = sdnn.challenge.read_images(data / "sparse-images-1024-first1200.tsv.gz", 1024)
    layers = sdnn.challenge.official_1024_network(120)
    cats, info = sdnn.challenge.infer(layers, inputs, details=True)
    truth = [int(line) for line in open(data / "neuron1024-l120-categories-first1200.tsv") if line.strip()]
    assert cats.tolist() == truth
    assert info["run_seconds"] > 0 and info["summary"]
    # the same on another stream, and against the host reference on a slice
    s = torch.cuda.Stream()
    assert sdnn.challenge.infer(layers, inputs, stream=s).tolist() == truth


def test_layers_shared_by_threads_and_freed_on_another_thread():
    import threading
    dtype = torch.bfloat16
    lin = sdnn.Linear(weights("blocks", 256, 256, dtype, seed=10))
    x = seeded(16, 256, seed=11, dtype=dtype).cuda()
    expect = lin(x)
    torch.cuda.synchronize()
    results, errors = [], []

    def work():
        try:
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                for _ in range(20):
                    y = lin(x)
                s.synchronize()
            results.append(torch.equal(y, expect))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [True] * 4
    conv = sdnn.Conv2d(seeded(32, 32, 3, 3, seed=12, dtype=torch.float16), padding=1)
    conv(seeded(1, 32, 8, 8, seed=13, dtype=torch.float16).cuda().contiguous(memory_format=torch.channels_last))
    held = [lin, conv]
    del lin, conv
    t = threading.Thread(target=held.clear)  # the last references die on another thread
    t.start()
    t.join()
    torch.cuda.synchronize()
    assert held == []
