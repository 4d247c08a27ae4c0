#!/usr/bin/env python3
"""Export the recurrent models users compare isomer's runtime with ONNX Runtime on.

Each is written the way current PyTorch exports it (random weights, fixed seed):

  lstm_b1_h256      nn.LSTM, seq 64, batch 1, input 128, hidden 256, 1 layer
  lstm_b1_h128_l2   nn.LSTM, seq 64, batch 1, input 64, hidden 128, 2 layers
  lstm_b1_h512      nn.LSTM, seq 32, batch 1, input 256, hidden 512, 1 layer
  lstm_b8_h512_l2   nn.LSTM, seq 32, batch 8, input 256, hidden 512, 2 layers
  bilstm_tm         nn.LSTM bidirectional, time-major, seq 48, batch 1, hidden 256
  lstm_opset9       nn.LSTM through the TorchScript exporter at opset 9, batch 1, hidden 256
  gru_opset23       nn.GRU, seq 64, batch 1, hidden 256, opset 23
  grucell_loop      nn.GRUCell called in a Python loop (32 steps, hidden 256): unrolled
  lstmcell_loop     nn.LSTMCell called in a Python loop (32 steps, hidden 256): unrolled
  bert_dynq         a 4-layer, 256-wide BERT-like encoder (seq 64) through
                    onnxruntime.quantization.quantize_dynamic (int8 weights)

    /work/torch2/bin/python scripts/export_rnn_probes.py --out build/rnn_probes [--only a,b]
"""
import argparse
import math
import os
import sys

# scripts/profile.py would shadow the standard library's profile, which torch.export imports.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402
from torch import nn  # noqa: E402


class Seq(nn.Module):
    """An nn.LSTM/nn.GRU returning its whole output sequence."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)[0]


class CellLoop(nn.Module):
    """A cell stepped in Python: the exporter unrolls the loop into per-step ops."""

    def __init__(self, cell, steps):
        super().__init__()
        self.cell, self.steps = cell, steps

    def forward(self, x):
        h = torch.zeros(x.shape[1], self.cell.hidden_size)
        state = (h, torch.zeros_like(h)) if isinstance(self.cell, nn.LSTMCell) else h
        outs = []
        for t in range(self.steps):
            state = self.cell(x[t], state)
            outs.append(state[0] if isinstance(state, tuple) else state)
        return torch.stack(outs)


class BertLayer(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.o = nn.Linear(width, width)
        self.ln1 = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)
        self.ln2 = nn.LayerNorm(width)

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(w // self.heads), dim=-1)
        x = self.ln1(x + self.o((p @ v).transpose(1, 2).reshape(b, s, w)))
        return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))


class Bert(nn.Module):
    def __init__(self, width=256, heads=4, layers=4):
        super().__init__()
        self.layers = nn.ModuleList(BertLayer(width, heads) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def probes():
    """name -> (module, example input, opset, dynamo)."""
    return {
        "lstm_b1_h256": (Seq(nn.LSTM(128, 256, batch_first=True)), torch.randn(1, 64, 128), 18, True),
        "lstm_b1_h128_l2": (Seq(nn.LSTM(64, 128, num_layers=2, batch_first=True)), torch.randn(1, 64, 64), 18, True),
        "lstm_b1_h512": (Seq(nn.LSTM(256, 512, batch_first=True)), torch.randn(1, 32, 256), 18, True),
        "lstm_b8_h512_l2": (Seq(nn.LSTM(256, 512, num_layers=2, batch_first=True)), torch.randn(8, 32, 256), 18, True),
        "bilstm_tm": (Seq(nn.LSTM(128, 256, bidirectional=True)), torch.randn(48, 1, 128), 18, True),
        "lstm_opset9": (Seq(nn.LSTM(128, 256, batch_first=True)), torch.randn(1, 64, 128), 9, False),
        "gru_opset23": (Seq(nn.GRU(128, 256, batch_first=True)), torch.randn(1, 64, 128), 23, True),
        "grucell_loop": (CellLoop(nn.GRUCell(128, 256), 32), torch.randn(32, 1, 128), 18, True),
        "lstmcell_loop": (CellLoop(nn.LSTMCell(128, 256), 32), torch.randn(32, 1, 128), 18, True),
        "bert_dynq": (Bert(), torch.randn(1, 64, 256), 18, True),
    }


def export(name, module, x, opset, dynamo, path):
    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, (x,), path, input_names=["x"], output_names=["y"], opset_version=opset,
                          dynamo=dynamo, external_data=False)
    if name.endswith("_dynq"):
        from onnxruntime.quantization import QuantType, quantize_dynamic
        src = path + ".float.onnx"
        os.replace(path, src)
        quantize_dynamic(src, path, weight_type=QuantType.QInt8)
        os.remove(src)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated names")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    only = set(filter(None, args.only.split(",")))
    for name, (module, x, opset, dynamo) in probes().items():
        if only and name not in only:
            continue
        path = os.path.join(args.out, name + ".onnx")
        export(name, module, x, opset, dynamo, path)
        print(f"wrote {path} (input {list(x.shape)}, opset {opset})")


if __name__ == "__main__":
    main()
