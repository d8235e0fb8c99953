#!/usr/bin/env python3
"""Draws the JSON of examples/train_structured (the MLP) or examples/train_cnn (the CNN) as one PNG:
test accuracy of every model (float, bf16 and int8 weights, the dense model's as a line) and its
end-to-end inference speed against the dense model at each timed batch (MLP: the faster of cuBLAS
and cuBLASLt with the epilogue fused; CNN: cuDNN fp16, the passes launched as CUDA graphs).

  plot_train_structured.py RESULT.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    r = json.load(open(argv[1]))
    models = r["models"]
    names = [m["name"] for m in models]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 5.5))
    x = range(len(models))
    w = 0.27
    for i, (key, label) in enumerate([("acc_float", "float"), ("acc_bf16", "bf16"), ("acc_int8", "int8 per row")]):
        ax1.bar([k + (i - 1) * w for k in x], [100 * m[key] for m in models], w, label=label)
    dense = 100 * models[0]["acc_bf16"]
    ax1.axhline(dense, color="k", lw=0.8)
    ax1.axhline(dense - 1.0, color="r", ls="--", lw=0.8, label="dense bf16 - 1 point")
    lo = min(100 * min(m["acc_int8"], m["acc_bf16"], m["acc_float"]) for m in models)
    ax1.set_ylim(max(0, lo - 1.5), 100)
    ax1.set_xticks(list(x))
    ax1.set_xticklabels(names, rotation=30, ha="right")
    ax1.set_ylabel("test accuracy (%)")
    ax1.set_title("MNIST test accuracy (%d train / %d test digits)" % (r["train"], r["test"]))
    ax1.legend(loc="upper right", fontsize=8)

    cnn = "model" in r
    key = "speedup_vs_cudnn_fp16" if cnn else "speedup_vs_best_dense"
    batches = [p["batch"] for p in models[0]["inference"]]
    wb = 0.8 / max(1, len(batches))
    for j, b in enumerate(batches):
        ax2.bar([k + (j - (len(batches) - 1) / 2) * wb for k in x],
                [m["inference"][j][key] for m in models], wb, label="batch %d" % b)
    ax2.axhline(1.0, color="k", lw=0.8)
    ax2.set_xticks(list(x))
    ax2.set_xticklabels(names, rotation=30, ha="right")
    ax2.set_ylabel("dense time / model time (end to end)")
    ax2.set_title("inference from the .sdnn file, automatic plans vs dense %s"
                  % ("cuDNN fp16 (graphs)" if cnn else "bf16"))
    ax2.legend(fontsize=8)
    what = r["model"] if cnn else "784-%d-%d-10 MLP" % (r["hidden"], r["hidden"])
    fig.suptitle("%s: %s, %s, commit %s; device training %.1f ms per epoch"
                 % ("train_cnn" if cnn else "train_structured", what, r["gpu"], r["commit"], r["device_epoch_ms"]))
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
