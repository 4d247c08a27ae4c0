"""Writes small models as torch 2.15's dynamo exporter writes them, for what it emits
that older exporters did not: a GQA decode step against a KV cache through
scaled_dot_product_attention(enable_gqa=True) (Unsqueeze with a 0-d axes tensor),
and torch.cond (an If whose branches are functions). tests/python/test_dynamo_exports.py
runs them. Run with torch >= 2.9 in this directory."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class DecodeStep(nn.Module):
    """One new token against a cache of 15: RMSNorm, GQA (4 query heads, 2 KV heads), SwiGLU."""

    def __init__(s, d=64, h=4, kv=2, ff=128):
        super().__init__()
        s.h, s.kv, s.dh = h, kv, d // h
        s.q, s.o = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        s.k, s.v = nn.Linear(d, kv * s.dh, bias=False), nn.Linear(d, kv * s.dh, bias=False)
        s.g, s.u, s.dn = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)
        s.n1, s.n2 = nn.RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)

    def forward(s, x, k_cache, v_cache):
        b, t, d = x.shape
        h = s.n1(x)
        q = s.q(h).view(b, t, s.h, s.dh).transpose(1, 2)
        k = torch.cat([k_cache, s.k(h).view(b, t, s.kv, s.dh).transpose(1, 2)], 2)
        v = torch.cat([v_cache, s.v(h).view(b, t, s.kv, s.dh).transpose(1, 2)], 2)
        a = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        x = x + s.o(a.transpose(1, 2).reshape(b, t, d))
        h = s.n2(x)
        return x + s.dn(F.silu(s.g(h)) * s.u(h)), k, v


class Cond(nn.Module):
    def __init__(s):
        super().__init__()
        s.a, s.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(s, x):
        return torch.cond(x.sum() > 0, lambda x: s.a(x).relu(), lambda x: s.b(x).sigmoid(), (x,))


with torch.no_grad():
    torch.onnx.export(DecodeStep().eval(), (torch.randn(1, 1, 64), torch.randn(1, 2, 15, 16), torch.randn(1, 2, 15, 16)),
                      "gqa_decode_dynamo.onnx", dynamo=True, opset_version=18, external_data=False,
                      input_names=["x", "k_cache", "v_cache"])
    torch.onnx.export(Cond().eval(), (torch.randn(4, 16),), "cond_dynamo.onnx", dynamo=True, opset_version=18,
                      external_data=False, input_names=["x"])
