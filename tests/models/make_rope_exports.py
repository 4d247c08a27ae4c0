"""Writes the small LLaMA-style attention exports (rotate-half RoPE, grouped KV heads)
that tests/python/test_rope_fusion.py runs: torch dynamo, TorchScript, and dynamo
with partial rotary dims (Phi, GPT-NeoX). Run with a torch that has the ONNX
exporter, in this directory."""
import torch, torch.nn as nn, sys
torch.manual_seed(0)
def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)
class Blk(nn.Module):
    def __init__(s, d=64, heads=4, kv=2, seq=8, rot=None):
        super().__init__(); s.h=heads; s.kv=kv; s.dh=d//heads; s.rot = rot or s.dh
        s.q=nn.Linear(d,d,bias=False); s.k=nn.Linear(d,kv*s.dh,bias=False); s.v=nn.Linear(d,kv*s.dh,bias=False); s.o=nn.Linear(d,d,bias=False)
        inv = 1.0/(10000**(torch.arange(0,s.rot,2).float()/s.rot)); t=torch.arange(64).float(); f=torch.outer(t,inv); e=torch.cat((f,f),-1)
        s.register_buffer("cos", e.cos()); s.register_buffer("sin", e.sin())
    def forward(s, x, pos):
        B,T,D=x.shape
        q=s.q(x).view(B,T,s.h,s.dh).transpose(1,2); k=s.k(x).view(B,T,s.kv,s.dh).transpose(1,2); v=s.v(x).view(B,T,s.kv,s.dh).transpose(1,2)
        c=s.cos[pos].unsqueeze(1); sn=s.sin[pos].unsqueeze(1)
        def rope(t):
            if s.rot == s.dh: return t*c + rotate_half(t)*sn
            tr, tp = t[..., :s.rot], t[..., s.rot:]
            return torch.cat((tr*c + rotate_half(tr)*sn, tp), -1)
        q=rope(q); k=rope(k)
        k=k[:,:,None].expand(B,s.kv,s.h//s.kv,T,s.dh).reshape(B,s.h,T,s.dh); v=v[:,:,None].expand(B,s.kv,s.h//s.kv,T,s.dh).reshape(B,s.h,T,s.dh)
        a=torch.softmax(q@k.transpose(-1,-2)/s.dh**0.5 + torch.full((T,T),-1e9).triu(1), -1)@v
        return x + s.o(a.transpose(1,2).reshape(B,T,D))
x=torch.randn(1,8,64); pos=torch.arange(8)[None]
for name, dyn, rot in (("rope_dynamo", True, None), ("rope_torchscript", False, None), ("rope_partial_dynamo", True, 8)):
    m=Blk(rot=rot).eval()
    torch.onnx.export(m,(x,pos),f"{name}.onnx",dynamo=dyn,opset_version=18 if dyn else 17, input_names=["x","position_ids"], output_names=["y"], **({"external_data": False} if dyn else {}))
    print(name, "ok")
