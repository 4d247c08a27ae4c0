#!/usr/bin/env python3
"""Export a 2-layer BERT-base encoder (random weights) to ONNX for isomer's benchmarks.

BERT-base dimensions (hidden 768, 12 heads, intermediate 3072, erf GELU, post-norm
LayerNorm, eps 1e-12), two layers, written in plain torch so that no download and
no `transformers` package are needed. Input: hidden states [1, 128, 768] (the
embedding lookup is left out: it is a gather, not where time goes). Static shapes,
opset 17 (LayerNormalization as one operator).

    .venv/bin/python scripts/export_bert.py --out build/models
"""
import argparse
import math
import os

import torch
from torch import nn

HIDDEN, HEADS, INTERMEDIATE, LAYERS, SEQ = 768, 12, 3072, 2, 128


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(HIDDEN, HIDDEN)
        self.k = nn.Linear(HIDDEN, HIDDEN)
        self.v = nn.Linear(HIDDEN, HIDDEN)
        self.o = nn.Linear(HIDDEN, HIDDEN)
        self.ln1 = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.up = nn.Linear(HIDDEN, INTERMEDIATE)
        self.down = nn.Linear(INTERMEDIATE, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN, eps=1e-12)

    def heads(self, x):
        b, s, _ = x.shape
        return x.view(b, s, HEADS, HIDDEN // HEADS).transpose(1, 2)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HIDDEN // HEADS)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.transpose(1, 2).reshape(b, s, HIDDEN)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="build/models")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bert_encoder2.onnx")
    if os.path.exists(path) and not args.force:
        print(f"{path}: exists (skipped; --force to redo)")
        return
    torch.manual_seed(0)
    model = Encoder().eval()
    x = torch.randn(1, SEQ, HIDDEN)
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(model, (x,), tmp, opset_version=17, input_names=["hidden"], output_names=["output"],
                          do_constant_folding=True)
    os.replace(tmp, path)
    print(f"{path}: written")


if __name__ == "__main__":
    main()
