"""Vision transformers written op by op the way torch 2.x's dynamo exporter writes the
timm modules they come from (see transformer.py for the decompositions): ViT-S/16 and
MLP-Mixer S/16, batch 1, 224x224, random weights, external data.
"""
import numpy as np
from onnx import TensorProto

from corpus.common import Built, GraphWriter, normal_input

F32 = TensorProto.FLOAT


def _patch_embed(g, x, dim, patch=16, size=224):
    """Conv patch k x k stride k, then x.flatten(2).transpose(1, 2)."""
    n = (size // patch) ** 2
    w = g.weight("patch_embed.proj.weight", [dim, 3, patch, patch], fan_in=3 * patch * patch)
    y = g.op("Conv", [x, w, g.bias("patch_embed.proj.bias", dim)], out="convolution",
             kernel_shape=[patch, patch], strides=[patch, patch], pads=[0, 0, 0, 0], dilations=[1, 1], group=1)
    y = g.op("Reshape", [y, g.i64([1, dim, n])], out="view")
    return g.op("Transpose", [y], out="transpose", perm=[0, 2, 1]), n


def _mlp(g, x, dim, hidden, prefix):
    h = g.gelu_erf(g.linear(x, dim, hidden, prefix + ".fc1"))
    return g.linear(h, hidden, dim, prefix + ".fc2")


def _head(g, x, dim, classes=1000):
    w = g.weight("head.weight", [dim, classes], fan_in=dim)
    return g.op("Add", [g.op("MatMul", [x, w], out="linear"), g.bias("head.bias", classes)], out="linear")


def vit_s16(layers=12, dim=384, heads=6, mlp=1536, seed=4):
    g = GraphWriter("vit_s16", seed)
    head_dim = dim // heads
    x = g.input("pixel_values", F32, [1, 3, 224, 224])
    t, n = _patch_embed(g, x, dim)
    # cat([cls_token.expand(B, -1, -1), x], 1) (the expand of a [1,1,dim] parameter to
    # batch 1 folds away), + pos_embed.
    cls = g.weight("cls_token", [1, 1, dim], std=0.02)
    t = g.op("Concat", [cls, t], out="cat", axis=1)
    t = g.op("Add", [t, g.weight("pos_embed", [1, n + 1, dim], std=0.02)], out="add")
    tokens = n + 1
    for i in range(layers):
        p = f"blocks.{i}"
        h = g.layer_norm(t, dim, p + ".norm1", eps=1e-6)
        qkv = g.linear(h, dim, 3 * dim, p + ".attn.qkv")
        qkv = g.op("Reshape", [qkv, g.i64([1, tokens, 3, heads, head_dim])], out="reshape")
        qkv = g.op("Transpose", [qkv], out="permute", perm=[2, 0, 3, 1, 4])
        parts = g.op("Split", [qkv], out="unbind", n_out=3, axis=0, num_outputs=3)
        q, k, v = (g.op("Squeeze", [s, g.i64([0])], out="unbind") for s in parts)
        a = g.sdpa(q, k, v, head_dim)
        a = g.op("Transpose", [a], out="transpose", perm=[0, 2, 1, 3])
        a = g.op("Reshape", [a, g.i64([1, tokens, dim])], out="reshape")
        t = g.op("Add", [t, g.linear(a, dim, dim, p + ".attn.proj")], out="add")
        h = g.layer_norm(t, dim, p + ".norm2", eps=1e-6)
        t = g.op("Add", [t, _mlp(g, h, dim, mlp, p + ".mlp")], out="add")
    t = g.layer_norm(t, dim, "norm", eps=1e-6)
    cls_out = g.op("Gather", [t, g.const(0, np.int64)], out="select", axis=1)
    g.output(_head(g, cls_out, dim), F32, [1, 1000], rename="logits")
    return Built(g.model(doc="ViT-S/16, timm VisionTransformer layout, dynamo-style decomposition"),
                 [normal_input("pixel_values", [1, 3, 224, 224])],
                 made=f"onnx.helper, timm ViT-S/16 ({layers} layers, dim {dim}, {heads} heads, 224) as torch 2.x "
                      "dynamo export writes it: patch Conv 16x16/16 + Reshape/Transpose, CLS Concat, "
                      "LayerNormalization, fused qkv MatMul+Add -> Reshape/Transpose/Split/Squeeze, sdpa decomposed, "
                      "erf Gelu decomposed",
                 extra={"layers": layers, "dim": dim, "heads": heads})


def mlp_mixer_s16(layers=8, dim=512, tokens_mlp=256, channels_mlp=2048, seed=5):
    g = GraphWriter("mlp_mixer_s16", seed)
    x = g.input("pixel_values", F32, [1, 3, 224, 224])
    t, n = _patch_embed(g, x, dim)
    for i in range(layers):
        p = f"blocks.{i}"
        # x + mlp_tokens(norm1(x).transpose(1, 2)).transpose(1, 2)
        h = g.layer_norm(t, dim, p + ".norm1", eps=1e-6)
        h = g.op("Transpose", [h], out="transpose", perm=[0, 2, 1])
        h = _mlp(g, h, n, tokens_mlp, p + ".mlp_tokens")
        h = g.op("Transpose", [h], out="transpose", perm=[0, 2, 1])
        t = g.op("Add", [t, h], out="add")
        # x + mlp_channels(norm2(x))
        h = g.layer_norm(t, dim, p + ".norm2", eps=1e-6)
        t = g.op("Add", [t, _mlp(g, h, dim, channels_mlp, p + ".mlp_channels")], out="add")
    t = g.layer_norm(t, dim, "norm", eps=1e-6)
    t = g.op("ReduceMean", [t, g.i64([1])], out="mean", keepdims=0)
    g.output(_head(g, t, dim), F32, [1, 1000], rename="logits")
    return Built(g.model(doc="MLP-Mixer S/16, timm MlpMixer layout, dynamo-style decomposition"),
                 [normal_input("pixel_values", [1, 3, 224, 224])],
                 made=f"onnx.helper, timm MLP-Mixer S/16 ({layers} layers, dim {dim}, token MLP {tokens_mlp}, "
                      f"channel MLP {channels_mlp}, 224) as torch 2.x dynamo export writes it: token mixing through "
                      "Transpose + MatMul/Add, channel mixing MatMul/Add, LayerNormalization, erf Gelu decomposed, "
                      "mean over tokens as ReduceMean",
                 extra={"layers": layers, "dim": dim})
