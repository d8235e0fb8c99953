# Host tests of the Python package (no GPU): structure analysis, pruning, the formats, scipy
# conversions, the 16-bit linear reference, error cases and object lifetimes. Each result is
# checked against an independent NumPy computation.
import threading

import numpy as np
import pytest
import scipy.sparse

import sdnn


def rng(seed=0):
    return np.random.default_rng(seed)


def dense(rows, cols, seed=0, dtype=np.float32):
    return rng(seed).standard_normal((rows, cols)).astype(dtype)


# ---- analysis ---------------------------------------------------------------------------

@pytest.mark.parametrize("rows,cols", [(1, 1), (33, 65), (64, 128), (100, 7)])
def test_analyze_counts_match_numpy(rows, cols):
    w = dense(rows, cols, seed=rows)
    w[rng(1).random(w.shape) < 0.8] = 0
    a = sdnn.analyze(w)
    assert a["rows"] == rows and a["cols"] == cols
    assert a["nnz"] == np.count_nonzero(w)
    blocks = 0
    for i in range(0, rows, 32):
        for j in range(0, cols, 32):
            blocks += bool(np.any(w[i:i + 32, j:j + 32]))
    assert a["blocks32"] == blocks
    assert a["blocks32_total"] == -(-rows // 32) * -(-cols // 32)
    padded = np.zeros((rows, -(-cols // 4) * 4), np.float32)
    padded[:, :cols] = w
    assert a["is_24"] == bool(np.all(np.count_nonzero(padded.reshape(rows, -1, 4), axis=2) <= 2))


def test_analyze_float16_and_noncontiguous_input_is_copied():
    w = dense(16, 32, dtype=np.float16)
    assert sdnn.analyze(w)["nnz"] == np.count_nonzero(w)
    view = dense(16, 64)[:, ::2]  # strided: the package copies it
    assert sdnn.analyze(view)["nnz"] == np.count_nonzero(view)


# ---- pruning ----------------------------------------------------------------------------

@pytest.mark.parametrize("sparsity", [0.0, 0.5, 0.9, 0.99])
def test_prune_unstructured_zeroes_the_smallest(sparsity):
    w = dense(40, 50, seed=3)
    p = sdnn.prune(w, "unstructured", sparsity)
    zeros = min(int(np.floor(sparsity * w.size + 0.5)), w.size - 1)
    assert np.count_nonzero(p == 0) == zeros
    kept = p != 0
    assert np.array_equal(p[kept], w[kept])  # values kept exactly
    if 0 < zeros < w.size:
        assert np.abs(w[~kept]).max() <= np.abs(w[kept]).min()


@pytest.mark.parametrize("block", [(16, 16), (32, 32), (16, 32)])
def test_prune_blocks_drops_the_weakest_blocks(block):
    br, bc = block
    w = dense(96, 80, seed=4)  # 80 is not a multiple of 32: partial edge blocks
    p = sdnn.prune(w, "blocks", 0.75, block)
    rb, cb = -(-96 // br), -(-80 // bc)
    norms, kept = [], []
    for i in range(rb):
        for j in range(cb):
            blk = (slice(i * br, (i + 1) * br), slice(j * bc, (j + 1) * bc))
            norms.append(float(np.sum(w[blk].astype(np.float64) ** 2)))
            k = bool(np.any(p[blk]))
            kept.append(k)
            if k:
                assert np.array_equal(p[blk], w[blk])
    assert sum(not k for k in kept) == int(np.floor(0.75 * rb * cb + 0.5))  # C++ rounds half away from 0
    assert max(n for n, k in zip(norms, kept) if not k) <= min(n for n, k in zip(norms, kept) if k)


def test_prune_24_keeps_the_two_largest_of_each_group():
    w = dense(8, 18, seed=5, dtype=np.float16)  # 18 = 4 groups + a padded one
    p = sdnn.prune(w, "2:4")
    assert p.dtype == np.float16
    assert sdnn.analyze(p)["is_24"]
    padded = np.zeros((8, 20), np.float16)
    padded[:, :18] = w
    for r in range(8):
        for g in range(5):
            grp = padded[r, 4 * g:4 * g + 4]
            top = sorted(np.argsort(-np.abs(grp.astype(np.float32)), kind="stable")[:2])
            for c in range(4):
                col = 4 * g + c
                if col < 18:
                    assert p[r, col] == (grp[c] if c in top else 0)


def test_prune_bad_arguments():
    w = dense(8, 8)
    with pytest.raises(ValueError, match="structure"):
        sdnn.prune(w, "diagonal")
    with pytest.raises(ValueError):
        sdnn.prune(w, "unstructured", 1.5)
    with pytest.raises(ValueError):
        sdnn.prune(w, "unstructured", -0.1)
    with pytest.raises(ValueError, match="2-D"):
        sdnn.prune(np.zeros((2, 2, 2), np.float32))
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        sdnn.prune(np.zeros((4, 4), np.int64))
    w[0, 0] = np.nan
    with pytest.raises(ValueError):
        sdnn.prune(w, "unstructured", 0.5)


# ---- formats ----------------------------------------------------------------------------

def test_block_sparse_round_trip_and_sizes():
    w = sdnn.prune(dense(64, 96, seed=6), "blocks", 0.5, (32, 32))
    b = sdnn.block_sparse(w, (32, 32))
    assert b.shape == (64, 96) and b.block_shape == (32, 32) and b.dtype == "float32"
    assert b.nnzb == sum(bool(np.any(w[i:i + 32, j:j + 32])) for i in range(0, 64, 32) for j in range(0, 96, 32))
    assert b.nbytes == b.nnzb * 32 * 32 * 4 + (2 + 1 + b.nnzb) * 4
    assert np.array_equal(sdnn.to_dense(b), w)


def test_sparse24_round_trip_refusal_and_prune():
    w = dense(16, 32, seed=7, dtype=np.float16)
    with pytest.raises(sdnn.Error, match="not 2:4"):
        sdnn.sparse24(w)
    s = sdnn.sparse24(w, prune=True)
    assert np.array_equal(sdnn.to_dense(s), sdnn.prune(w, "2:4"))
    s2 = sdnn.sparse24(sdnn.prune(w, "2:4"))
    assert s2.shape == (16, 32) and s2.dtype == "float16" and s2.nbytes == 16 * 16 * 2 + 16 * 4
    assert issubclass(sdnn.Error, ValueError)


def test_csr_from_and_to_scipy():
    m = scipy.sparse.random(70, 45, density=0.08, format="csr", dtype=np.float32, random_state=2)
    c = sdnn.from_scipy(m)
    assert c.shape == (70, 45) and c.nnz == m.nnz
    back = sdnn.to_scipy(c)
    assert (back != m).nnz == 0
    d = m.toarray()
    c2 = sdnn.to_csr(d)
    assert (sdnn.to_scipy(c2) != m).nnz == 0
    coo = scipy.sparse.coo_matrix(m)  # any scipy format converts
    assert sdnn.from_scipy(coo).nnz == m.nnz


def test_csr_malformed_is_refused():
    indptr = np.array([0, 2, 1], np.int32)  # decreasing
    with pytest.raises(sdnn.Error):
        sdnn.CSR.from_arrays(2, 3, indptr, np.array([0, 1], np.int32), np.ones(2, np.float32))
    with pytest.raises(sdnn.Error):  # column out of range
        sdnn.CSR.from_arrays(1, 3, np.array([0, 1], np.int32), np.array([3], np.int32), np.ones(1, np.float32))
    with pytest.raises(TypeError, match="int32"):
        sdnn.CSR.from_arrays(1, 3, np.array([0, 1], np.int64), np.array([0], np.int32), np.ones(1, np.float32))


# ---- the 16-bit linear reference --------------------------------------------------------

@pytest.mark.parametrize("relu", [False, True])
def test_linear_reference_matches_float64_within_one_rounding(relu):
    x = dense(7, 96, seed=8, dtype=np.float16)
    w = sdnn.prune(dense(33, 96, seed=9, dtype=np.float16), "unstructured", 0.7)
    b = rng(10).standard_normal(33).astype(np.float32)
    y = sdnn.linear_reference(x, w, b, relu)
    assert y.dtype == np.float16 and y.shape == (7, 33)
    ref = x.astype(np.float64) @ w.astype(np.float64).T + b
    if relu:
        ref = np.maximum(ref, 0)
    # Float accumulation (relative error <= 96 * 2^-24 of sum |x w|) and one rounding to fp16
    # (half an ulp: 2^-11 relative).
    mag = np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T + np.abs(b)
    bound = np.abs(ref) * 2.0**-11 + mag * 96 * 2.0**-24 + 2.0**-24
    assert np.all(np.abs(y.astype(np.float64) - ref) <= bound)


def test_linear_reference_bad_shapes_and_types():
    x = dense(2, 8, dtype=np.float16)
    w = dense(4, 9, dtype=np.float16)
    with pytest.raises(ValueError, match="features"):
        sdnn.linear_reference(x, w)
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        sdnn.linear_reference(dense(2, 8), dense(4, 8))
    with pytest.raises(TypeError, match="expected the type of"):
        sdnn.linear_reference(x, dense(4, 8))
    with pytest.raises(ValueError, match="bias"):
        sdnn.linear_reference(x, dense(4, 8, dtype=np.float16), np.ones(5, np.float32))


def test_non_arrays_are_refused_with_a_type_error():
    with pytest.raises(TypeError, match="__dlpack__"):
        sdnn._sdnn.analyze(object())
    with pytest.raises(TypeError):
        sdnn.analyze("not an array")


# ---- the device layers without CUDA, lifetimes --------------------------------------------

def test_device_layers_without_cuda_say_so():
    if sdnn.has_cuda:
        pytest.skip("this module has its device layers")
    with pytest.raises(NotImplementedError, match="without CUDA"):
        sdnn.Linear(dense(4, 8, dtype=np.float16))
    with pytest.raises(NotImplementedError, match="without CUDA"):
        sdnn.Conv2d(rng().standard_normal((8, 4, 3, 3)).astype(np.float16))


def test_objects_outlive_their_inputs_and_die_on_any_thread():
    w = sdnn.prune(dense(64, 64, seed=11), "blocks", 0.5, (32, 32))
    b = sdnn.block_sparse(w, (32, 32))
    s = sdnn.sparse24(w, prune=True)
    expect_b, expect_s = w.copy(), sdnn.to_dense(s).copy()
    del w  # the formats own copies
    assert np.array_equal(sdnn.to_dense(b), expect_b)
    objs = [b, s]
    del b, s
    t = threading.Thread(target=objs.clear)
    t.start()
    t.join()
    assert objs == []
    assert np.array_equal(expect_s, expect_s)


def test_torch_cpu_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    w = torch.randn(32, 64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    p = sdnn.prune(w, "2:4")
    assert isinstance(p, torch.Tensor) and p.dtype == torch.bfloat16
    assert sdnn.analyze(p)["is_24"]
    x = torch.randn(3, 64, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    y = sdnn.linear_reference(x, p)
    ref = x.double() @ p.double().T
    assert torch.all((y.double() - ref).abs() <= ref.abs() * 2.0**-8 + 1e-6)
    wq = torch.randn(8, 8, requires_grad=True)  # a tensor that requires grad is read through .detach()
    assert sdnn.analyze(wq)["nnz"] == 64


# ---- the Graph Challenge ------------------------------------------------------------------

DATA = __import__("pathlib").Path(__file__).resolve().parents[2] / "tests" / "data"


def official_truth(images):
    ids = [int(line) for line in open(DATA / "neuron1024-l120-categories-first1200.tsv") if line.strip()]
    return np.array([i for i in ids if i <= images], np.int32)


def test_challenge_reference_matches_the_official_categories():
    images = 300
    every = sdnn.challenge.read_images(DATA / "sparse-images-1024-first1200.tsv.gz", 1024)
    assert every.shape == (1200, 1024)
    inputs = sdnn.from_scipy(sdnn.to_scipy(every)[:images])
    layers = sdnn.challenge.official_1024_network(120)
    assert sdnn.challenge.bias(1024) == pytest.approx(-0.3)
    cats = sdnn.challenge.infer(layers, inputs, device="cpu")
    assert cats.dtype == np.int32
    assert np.array_equal(cats, official_truth(images))


def test_challenge_bad_input():
    layers = [sdnn.challenge.official_1024_layer(0)]
    with pytest.raises(ValueError, match="columns"):
        sdnn.challenge.infer(layers, sdnn.to_csr(np.ones((2, 512), np.float32)), device="cpu")
    with pytest.raises(ValueError, match="N x N"):
        sdnn.challenge.infer([sdnn.to_csr(np.ones((4, 8), np.float32))], sdnn.to_csr(np.ones((1, 4), np.float32)),
                             device="cpu")
    with pytest.raises(ValueError, match="at least one"):
        sdnn.challenge.infer([], sdnn.to_csr(np.ones((1, 4), np.float32)), device="cpu")
    with pytest.raises(ValueError, match="device"):
        sdnn.challenge.infer(layers, sdnn.to_csr(np.ones((1, 1024), np.float32)), device="tpu")
    with pytest.raises(sdnn.Error):
        sdnn.challenge.read_layer(DATA / "no-such-file.tsv", 1024)
    if not sdnn.has_cuda:
        with pytest.raises(NotImplementedError, match="without CUDA"):
            sdnn.challenge.infer(layers, sdnn.to_csr(np.ones((1, 1024), np.float32)), stream=0)
