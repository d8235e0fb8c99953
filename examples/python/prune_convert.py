#!/usr/bin/env python3
"""Prune a torch model, convert it with sdnn, compare outputs and time against the dense model.

    python3 examples/python/prune_convert.py [--width 4096] [--batch 1] [--structure blocks] [--sparsity 0.9]

An MLP (1024 -> width -> width -> width -> 10) whose hidden layers are pruned by magnitude to the
structure sdnn's tensor-core kernels skip (32 x 32 blocks, 2:4 or unstructured), in bfloat16 on the
GPU. sdnn.torch.convert swaps each pruned nn.Linear for sdnn's layer where sdnn's plan is faster
than cuBLAS at the batch size, and says why per layer. Needs a CUDA GPU, PyTorch, and sdnn
installed with its device layers (pip install --no-build-isolation ./python on a GPU machine).
"""
import argparse
import statistics

import torch

import sdnn
import sdnn.torch


def time_us(fn, reps=50, warmup=10):
    """Median GPU time of fn() by CUDA events (one forward each, host work included)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--structure", default="blocks", choices=sdnn.STRUCTURES)
    ap.add_argument("--sparsity", type=float, default=0.9)
    args = ap.parse_args()
    if not (torch.cuda.is_available() and sdnn.has_cuda):
        raise SystemExit("prune_convert: needs a CUDA GPU and sdnn built with its device layers")

    torch.manual_seed(0)
    w = args.width
    model = torch.nn.Sequential(torch.nn.Linear(1024, w), torch.nn.ReLU(), torch.nn.Linear(w, w), torch.nn.ReLU(),
                                torch.nn.Linear(w, w), torch.nn.ReLU(), torch.nn.Linear(w, 10))
    with torch.no_grad():  # prune every hidden layer (the 10-wide output stays dense)
        for m in model:
            if isinstance(m, torch.nn.Linear) and m.out_features > 10:
                m.weight.copy_(sdnn.prune(m.weight, args.structure, args.sparsity, (32, 32)))
    dense = model.cuda().to(torch.bfloat16).eval()
    fast = sdnn.torch.convert(dense, dtype=torch.bfloat16, batch_sizes=(args.batch,))
    print(sdnn.torch.report(fast))

    x = torch.randn(args.batch, 1024, device="cuda").to(torch.bfloat16)
    with torch.no_grad():
        want, got = dense(x).float(), fast(x).float()
        t_dense = time_us(lambda: dense(x))
        t_fast = time_us(lambda: fast(x))
    print(f"max |sdnn - dense| = {(got - want).abs().max().item():.4g} (outputs up to {want.abs().max().item():.4g}; "
          f"each model rounds its hidden layers to bf16)")
    print(f"batch {args.batch}: dense torch bf16 {t_dense:.1f} us, converted {t_fast:.1f} us, "
          f"speedup {t_dense / t_fast:.2f}x")


if __name__ == "__main__":
    main()
