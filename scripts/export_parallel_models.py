#!/usr/bin/env python3
"""Export the models `isomer parallelize` is measured on (random weights, plain torch).

  bert_enc{L}   BERT-like encoder: L post-norm layers, hidden 768, 12 heads, FFN 3072,
                erf GELU, sequence 128 (input: hidden states [batch, 128, 768])
  gpt2_block{L} GPT-2-like decoder: L pre-norm blocks, hidden 768, 12 heads, causal
                mask, tanh GELU, sequence 256
  mlp{L}        L linear layers of width 4096 with ReLU (input [batch, 4096])
  small_*       hidden 256 (4 heads, sequences 64), MLP width 1024: the 2-rank validation
  tiny_*        hidden 64 (4 heads, sequences 16), MLP width 128: tests

The batch dimension is dynamic: `isomer parallelize --batch N` fixes it. Opset 17.

    .venv/bin/python scripts/export_parallel_models.py --out build/models/parallel [--sizes tiny,small,full]
"""
import argparse
import math
import os

import torch
from torch import nn


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.h, self.nh = hidden, heads
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(hidden, eps=1e-12), nn.LayerNorm(hidden, eps=1e-12)
        self.up, self.down = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def heads(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.nh, self.h // self.nh).transpose(1, 2)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.h // self.nh), dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, self.h)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))


class DecoderBlock(nn.Module):
    def __init__(self, hidden, heads, seq):
        super().__init__()
        self.h, self.nh = hidden, heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc, self.out = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), -1e4), diagonal=1))

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(self.h, dim=-1)
        q, k, v = (t.view(b, s, self.nh, self.h // self.nh).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.h // self.nh) + self.mask, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, self.h))
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Stack(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def mlp(width, layers):
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods)


SIZES = {  # hidden, heads, encoder sequence, decoder sequence, MLP width
    "tiny": (64, 4, 16, 16, 128),
    "small": (256, 4, 64, 64, 1024),
    "": (768, 12, 128, 256, 4096),
}


def models(size):
    h, nh, seq_e, seq_d, w = SIZES[size]
    p = size + "_" if size else ""
    return {
        f"{p}bert_enc2": (Stack([EncoderLayer(h, nh, 4 * h) for _ in range(2)]), (seq_e, h)),
        f"{p}gpt2_block2": (Stack([DecoderBlock(h, nh, seq_d) for _ in range(2)]), (seq_d, h)),
        f"{p}mlp4": (mlp(w, 4), (w,)),
    } | ({} if size else {
        "gpt2_block12": (Stack([DecoderBlock(h, nh, seq_d) for _ in range(12)]), (seq_d, h)),
    })


def export(name, model, shape, out_dir, force):
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path) and not force:
        return path
    torch.manual_seed(0)
    for prm in model.parameters():
        nn.init.normal_(prm, std=0.02)
    model.eval()
    x = torch.randn(2, *shape)
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, do_constant_folding=True)
    print("wrote", path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="tiny,small,full", help="comma-separated subset of tiny, small, full")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for size in a.sizes.split(","):
        for name, (model, shape) in models("" if size == "full" else size).items():
            export(name, model, shape, a.out, a.force)


if __name__ == "__main__":
    main()
