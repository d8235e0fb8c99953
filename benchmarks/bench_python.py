#!/usr/bin/env python3
"""The Python package against the C++ call and against torch, on one GPU (family "python").

    python3 benchmarks/bench_python.py [--json out.jsonl] [--commit HASH] [--reps 50]

1. Per-call overhead: host microseconds per call of sdnn.Linear / sdnn.torch.SparseLinear on a
   tiny layer (64 x 64, one row), 200 calls back to back (no synchronisation) per round, median
   of rounds, against the same layer's C++ call made in a loop inside the module (time_calls).
2. Layers: a 4096 x 4096 bf16 layer at 90 % 32x32-block sparsity and at 2:4, at batch 1, 32 and
   1024: sdnn (automatic) through the Python package against dense torch (cuBLAS bf16), torch's
   2:4 (to_sparse_semi_structured, where this torch has it), BSR and CSR matmuls. GPU time by CUDA
   events around each call, L2 flushed (a 256 MB write) before each, median of --reps after warm-up.
3. Models: a 784-1024-1024-10 MLP pruned to 90 % blocks / 2:4 and a small CNN pruned to 75 %
   channel blocks, converted with sdnn.torch.convert, against the same dense model in bf16/fp16
   at batch 1, 32 and 1024 (CNN: 1, 32, 128). Events around the whole forward (host work included).
One JSON line per measurement; benchmarks/plot_python.py draws the PNG.
"""
import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time

import torch

import sdnn
import sdnn.torch

FLUSH = None


def flush_l2():
    global FLUSH
    if FLUSH is None:
        FLUSH = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
    FLUSH.zero_()


def gpu_time_us(fn, reps, flush=True, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if flush:
            flush_l2()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    return statistics.median(times), min(times), max(times)


def host_us_per_call(fn, calls=200, rounds=21):
    fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(per)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--commit", default="")
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    out = open(args.json, "w") if args.json else None
    props = torch.cuda.get_device_properties(0)
    base = {"family": "python", "gpu": props.name, "torch": torch.__version__, "cuda_runtime": torch.version.cuda,
            "date": datetime.date.today().isoformat(), "commit": args.commit}

    def emit(**kw):
        line = dict(base, **kw)
        print(json.dumps(line), flush=True)
        if out:
            out.write(json.dumps(line) + "\n")

    torch.manual_seed(0)
    # 1. Overhead on a tiny layer.
    w = torch.randn(64, 64).to(torch.bfloat16)
    x = torch.randn(1, 64, device="cuda").to(torch.bfloat16)
    y = torch.empty(1, 64, device="cuda", dtype=torch.bfloat16)
    lin = sdnn.Linear(w)
    stream = torch.cuda.current_stream().cuda_stream
    lin.plan(1)
    cpp = []
    for _ in range(21):
        cpp.append(lin._impl.time_calls(x.data_ptr(), y.data_ptr(), 1, stream, 200) * 1e6)
        torch.cuda.synchronize()
    cpp_us = statistics.median(cpp)
    py_out_us = host_us_per_call(lambda: lin(x, out=y))
    py_us = host_us_per_call(lambda: lin(x))
    mod = sdnn.torch.SparseLinear(w.cuda(), dtype=torch.bfloat16)
    with torch.no_grad():
        mod_us = host_us_per_call(lambda: mod(x))
    dense_mod = torch.nn.Linear(64, 64, bias=False).cuda().to(torch.bfloat16)
    with torch.no_grad():
        torch_us = host_us_per_call(lambda: dense_mod(x))
    for what, us in [("cpp_call", cpp_us), ("sdnn.Linear(x, out=y)", py_out_us), ("sdnn.Linear(x)", py_us),
                     ("sdnn.torch.SparseLinear", mod_us), ("torch.nn.Linear (dense)", torch_us)]:
        emit(section="overhead", shape="64x64", n=1, what=what, host_us_per_call=round(us, 3),
             overhead_vs_cpp_us=round(us - cpp_us, 3))

    # 2. One layer, sdnn against torch's paths.
    M = K = 4096
    for structure in ("blocks", "2:4"):
        wf = torch.randn(M, K)
        wp = sdnn.prune(wf, structure, 0.9, (32, 32)).to(torch.bfloat16)
        wd = wp.cuda()
        lin = sdnn.Linear(wp, max_rows=1024)
        lin.plan(1024)
        for n in (1, 32, 1024):
            xn = torch.randn(n, K, device="cuda").to(torch.bfloat16)
            yn = torch.empty(n, M, device="cuda", dtype=torch.bfloat16)
            paths = {"sdnn": lambda: lin(xn, out=yn),
                     "torch_dense_bf16": lambda: torch.nn.functional.linear(xn, wd)}
            if structure == "2:4":
                try:
                    from torch.sparse import to_sparse_semi_structured
                    ws = to_sparse_semi_structured(wd)
                    torch.nn.functional.linear(xn, ws)
                    paths["torch_2:4"] = lambda: torch.nn.functional.linear(xn, ws)
                except Exception as e:  # noqa: BLE001 - reported, not fatal
                    emit(section="layer", structure=structure, n=n, path="torch_2:4", error=str(e)[:200])
            else:
                try:
                    wb = wd.to_sparse_bsr((32, 32))
                    (wb @ xn.T)
                    paths["torch_bsr"] = lambda: wb @ xn.T
                except Exception as e:  # noqa: BLE001
                    emit(section="layer", structure=structure, n=n, path="torch_bsr", error=str(e)[:200])
            try:
                wc = wd.to_sparse_csr()
                (wc @ xn.T)
                paths["torch_csr"] = lambda: wc @ xn.T
            except Exception as e:  # noqa: BLE001
                emit(section="layer", structure=structure, n=n, path="torch_csr", error=str(e)[:200])
            times = {p: gpu_time_us(f, args.reps) for p, f in paths.items()}
            dense_us = times["torch_dense_bf16"][0]
            for p, (med, lo, hi) in times.items():
                emit(section="layer", shape=f"{M}x{K}", structure=structure, sparsity=0.9 if structure == "blocks"
                     else 0.5, n=n, path=p, time_us=round(med, 3), min_us=round(lo, 3), max_us=round(hi, 3),
                     reps=args.reps, speedup_vs_torch_dense=round(dense_us / med, 3),
                     choice=lin.explain(n).split(";")[0] if p == "sdnn" else "")

    # 3. Models end to end.
    sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/python/tests")
    from test_gpu import CNN, MLP, prune_model  # the test models
    for name, make, dtype, structure, batches, shape in [
            ("mlp", MLP, torch.bfloat16, "blocks", (1, 32, 1024), (784,)),
            ("mlp", MLP, torch.bfloat16, "2:4", (1, 32, 1024), (784,)),
            ("cnn", CNN, torch.float16, "blocks", (1, 32, 128), (1, 28, 28))]:
        torch.manual_seed(0)
        dense = prune_model(make(), structure).cuda().to(dtype).eval()
        for n in batches:
            # convs planned at this batch from an example input (dense kept where cuDNN wins)
            conv = sdnn.torch.convert(dense, dtype=dtype, batch_sizes=batches,
                                      example_input=torch.zeros(n, *shape, device="cuda", dtype=dtype))
            xn = torch.randn(n, *shape, device="cuda").to(dtype)
            with torch.no_grad():
                conv(xn)  # plans the convolutions at this size
                td = gpu_time_us(lambda: dense(xn), args.reps)
                ts = gpu_time_us(lambda: conv(xn), args.reps)
                err = (conv(xn).float() - dense(xn).float()).abs().max().item()
            emit(section="model", model=name, structure=structure, dtype=str(dtype).replace("torch.", ""), n=n,
                 dense_us=round(td[0], 3), sdnn_us=round(ts[0], 3), speedup=round(td[0] / ts[0], 3),
                 max_abs_diff=err, report=sdnn.torch.report(conv))
    if out:
        out.close()


if __name__ == "__main__":
    main()
