"""Emits the CUDA kernels of scripts/mugraph_regions.py's region models (`isomer
mugraph emit-cuda`), one sub-directory per region, for scripts/cuda_gpu_check.py.

  python3 scripts/cuda_emit_regions.py --isomer build/isomer --out DIR [REGION ...]"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import onnx  # noqa: E402

import mugraph_regions  # noqa: E402

DEFAULT = ["attention_gqa_32x8_1024", "attention_decode_32x8_4096", "rmsnorm_512x2048", "layernorm_gelu_128x768",
           "softmax_8x512"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--isomer", default="build/isomer")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rows", type=int, help="emit-cuda --rows (a tiling sweep; appended to the directory name)")
    ap.add_argument("--chunk", type=int, help="emit-cuda --chunk (likewise)")
    ap.add_argument("--splits", type=int, help="emit-cuda --splits (likewise)")
    ap.add_argument("--min-tiles", type=int, help="emit-cuda --min-tiles (likewise)")
    ap.add_argument("--min-blocks", type=int, help="emit-cuda --min-blocks (likewise)")
    ap.add_argument("regions", nargs="*", default=DEFAULT)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.regions:
            model = os.path.join(tmp, name + ".onnx")
            onnx.save(mugraph_regions.REGIONS[name](), model)
            extra, suffix = [], ""
            if a.rows:
                extra, suffix = extra + ["--rows", str(a.rows)], suffix + f"_r{a.rows}"
            if a.chunk:
                extra, suffix = extra + ["--chunk", str(a.chunk)], suffix + f"_c{a.chunk}"
            if a.splits:
                extra, suffix = extra + ["--splits", str(a.splits)], suffix + f"_s{a.splits}"
            if a.min_tiles:
                extra, suffix = extra + ["--min-tiles", str(a.min_tiles)], suffix + f"_t{a.min_tiles}"
            if a.min_blocks:
                extra, suffix = extra + ["--min-blocks", str(a.min_blocks)], suffix + f"_b{a.min_blocks}"
            out = os.path.join(a.out, name + suffix)
            p = subprocess.run([a.isomer, "mugraph", "emit-cuda", model, "--out", out, "--mugraph-seconds",
                                str(a.seconds)] + extra, capture_output=True, text=True)
            print(f"== {name}\n{p.stdout.strip()}")
            if p.returncode != 0:
                print(p.stderr[-3000:])
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
