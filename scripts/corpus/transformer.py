"""Transformer blocks written op by op the way torch 2.x's exporter
(`torch.onnx.export(..., dynamo=True)`, torchlib at opset 18, its optimizer on) writes
the Hugging Face modules they come from:

- nn.Linear on a 3-D input -> MatMul + Add (torchlib's Transpose of the weight is folded
  into the initializer by the exporter's optimizer, which always folds a Transpose of a
  weight it is the only user of);
- GPT-2's Conv1D (addmm on a 2-D view) -> Reshape, Gemm, Reshape;
- layer_norm -> one LayerNormalization; RMSNorm stays decomposed (Pow, ReduceMean, Add,
  Sqrt, Reciprocal, Mul, Mul: aten.rsqrt is Reciprocal(Sqrt)); silu -> Sigmoid + Mul;
  erf Gelu -> Div, Erf, Add, Mul, Mul (no Gelu op below opset 20);
- scaled_dot_product_attention -> Mul by sqrt(scale) on q and on the transposed k, MatMul,
  mask Add (a bool mask through Where(mask, 0, -inf)), Softmax, MatMul;
- sizes from `x.shape` with a dynamic batch -> Shape, Squeeze, Reshape, Concat feeding a
  Reshape or Expand;
- torch.split -> Split with a sizes input; unbind -> Split + Squeeze.

No Cast appears: in a float32 model `.to(torch.float32)` (HF's RMSNorm) aliases its
input and the exporter writes nothing for it.
Weights are random (fixed seed) and saved as external data, `<name>.onnx.data`.
"""
import numpy as np
from onnx import TensorProto

from corpus.common import Built, GraphWriter, causal_mask_bool, integer_input, normal_input

F32 = TensorProto.FLOAT


# --- BERT-base encoder (HF BertModel, sdpa attention) ------------------------------
def bert_base(layers=2, seq=128, hidden=768, heads=12, ffn=3072, vocab=30522, seed=1):
    g = GraphWriter("bert_base", seed)
    head_dim = hidden // heads
    ids = g.input("input_ids", TensorProto.INT64, ["batch", seq])
    mask_in = g.input("attention_mask", TensorProto.INT64, ["batch", seq])

    # The batch size as a symbol (aten.sym_size), used by every view and expand.
    batch = g.op("Shape", [ids], out="sym_size_int", start=0, end=1)
    batch = g.op("Squeeze", [batch, g.i64([0])], out="sym_size_int")
    batch_1d = g.op("Reshape", [batch, g.i64([-1])], out="view")

    def dims(*rest):
        return g.op("Concat", [batch_1d, g.i64(list(rest))], out="cat", axis=0)

    # Embeddings: word + token type (a zero buffer expanded to the batch) + position
    # (the position_ids buffer slice, folded to a constant), then LayerNorm.
    word = g.weight("embeddings.word_embeddings.weight", [vocab, hidden], std=0.02)
    pos = g.weight("embeddings.position_embeddings.weight", [512, hidden], std=0.02)
    tok = g.weight("embeddings.token_type_embeddings.weight", [2, hidden], std=0.02)
    x = g.op("Gather", [word, ids], out="embedding", axis=0)
    tt_ids = g.op("Expand", [g.tensor("embeddings.token_type_ids", np.zeros((1, seq), np.int64)), dims(seq)],
                  out="expand")
    x = g.op("Add", [x, g.op("Gather", [tok, tt_ids], out="embedding", axis=0)], out="add")
    pos_ids = g.tensor("embeddings.position_ids", np.arange(seq, dtype=np.int64)[None, :])
    x = g.op("Add", [x, g.op("Gather", [pos, pos_ids], out="embedding", axis=0)], out="add")
    x = g.layer_norm(x, hidden, "embeddings.LayerNorm", eps=1e-12)

    # _prepare_4d_attention_mask_for_sdpa: mask[:, None, None, :].expand(b, 1, q, k),
    # 1 - mask, then masked_fill(inverted.bool(), finfo.min).
    m = g.op("Unsqueeze", [mask_in, g.i64([1, 2])], out="unsqueeze")
    m = g.op("Expand", [m, dims(1, seq, seq)], out="expand")
    m = g.op("Cast", [m], out="_to_copy", to=TensorProto.FLOAT)
    inv = g.op("Sub", [g.const(1.0), m], out="rsub")
    inv_bool = g.op("Cast", [inv], out="_to_copy", to=TensorProto.BOOL)
    mask = g.op("Where", [inv_bool, g.const(np.finfo(np.float32).min), inv], out="masked_fill")

    for i in range(layers):
        p = f"encoder.layer.{i}"

        def heads_view(t):
            t = g.op("Reshape", [t, dims(seq, heads, head_dim)], out="view")
            return g.op("Transpose", [t], out="transpose", perm=[0, 2, 1, 3])

        q = heads_view(g.linear(x, hidden, hidden, p + ".attention.self.query"))
        k = heads_view(g.linear(x, hidden, hidden, p + ".attention.self.key"))
        v = heads_view(g.linear(x, hidden, hidden, p + ".attention.self.value"))
        a = g.sdpa(q, k, v, head_dim, mask=mask)
        a = g.op("Transpose", [a], out="transpose", perm=[0, 2, 1, 3])
        a = g.op("Reshape", [a, dims(seq, hidden)], out="reshape")
        a = g.linear(a, hidden, hidden, p + ".attention.output.dense")
        x = g.layer_norm(g.op("Add", [a, x], out="add"), hidden, p + ".attention.output.LayerNorm", eps=1e-12)
        h = g.gelu_erf(g.linear(x, hidden, ffn, p + ".intermediate.dense"))
        h = g.linear(h, ffn, hidden, p + ".output.dense")
        x = g.layer_norm(g.op("Add", [h, x], out="add"), hidden, p + ".output.LayerNorm", eps=1e-12)

    out = g.output(x, F32, ["batch", seq, hidden], rename="last_hidden_state")
    # Pooler: the first token through dense + tanh (hidden_states[:, 0] -> Gather).
    cls = g.op("Gather", [out, g.const(0, np.int64)], out="select", axis=1)
    w = g.weight("pooler.dense.weight", [hidden, hidden], fan_in=hidden)
    pooled = g.op("Add", [g.op("MatMul", [cls, w], out="linear"), g.bias("pooler.dense.bias", hidden)], out="linear")
    g.output(g.op("Tanh", [pooled], out="tanh"), F32, ["batch", hidden], rename="pooler_output")

    return Built(g.model(doc="BERT-base encoder, HF BertModel layout, dynamo-style decomposition"),
                 [integer_input("input_ids", [1, seq], 0, vocab, model_shape=["batch", seq]),
                  integer_input("attention_mask", [1, seq], 0, 2, model_shape=["batch", seq])],
                 made=f"onnx.helper, HF BertModel ({layers} layers, hidden {hidden}, {heads} heads, seq {seq}, "
                      "dynamic batch) as torch 2.x dynamo export writes it: sdpa decomposed, mask via Where(finfo.min) "
                      "+ Add, erf Gelu decomposed, Q/K/V as MatMul+Add",
                 extra={"layers": layers, "seq": seq, "hidden": hidden, "heads": heads})


# --- GPT-2 block (HF GPT2Block, eager attention) ------------------------------------
def gpt2_block(seq=128, hidden=768, heads=12, n_positions=1024, seed=2):
    g = GraphWriter("gpt2_block", seed)
    head_dim = hidden // heads
    x = g.input("hidden_states", F32, [1, seq, hidden])

    def conv1d(t, n_in, n_out, prefix):
        """HF's Conv1D: addmm(bias, x.view(-1, n_in), weight).view(..., n_out)."""
        t2 = g.op("Reshape", [t, g.i64([-1, n_in])], out="view")
        w = g.weight(prefix + ".weight", [n_in, n_out], fan_in=n_in)
        y = g.op("Gemm", [t2, w, g.bias(prefix + ".bias", n_out)], out="addmm")
        return g.op("Reshape", [y, g.i64([1, seq, n_out])], out="view")

    def split_heads(t):
        t = g.op("Reshape", [t, g.i64([1, seq, heads, head_dim])], out="view")
        return g.op("Transpose", [t], out="permute", perm=[0, 2, 1, 3])

    residual = x
    h = g.layer_norm(x, hidden, "ln_1")
    qkv = conv1d(h, hidden, 3 * hidden, "attn.c_attn")
    q, k, v = g.op("Split", [qkv, g.i64([hidden] * 3)], out="split_with_sizes", n_out=3, axis=2)
    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    kt = g.op("Transpose", [k], out="transpose", perm=[0, 1, 3, 2])
    w = g.op("MatMul", [q, kt], out="matmul")
    w = g.op("Div", [w, g.const(float(head_dim) ** 0.5)], out="div")
    # causal_mask = self.bias[:, :, k_len - q_len : k_len, :k_len] on the registered
    # [1, 1, n_positions, n_positions] lower-triangular bool buffer.
    bias = g.tensor("attn.bias", causal_mask_bool(n_positions)[None, None])
    cm = g.op("Slice", [bias, g.i64([0, 0]), g.i64([seq, seq]), g.i64([2, 3]), g.i64([1, 1])], out="slice")
    w = g.op("Where", [cm, w, g.const(-np.inf)], out="where")
    w = g.op("Softmax", [w], out="softmax", axis=-1)
    a = g.op("MatMul", [w, v], out="matmul")
    a = g.op("Transpose", [a], out="permute", perm=[0, 2, 1, 3])
    a = g.op("Reshape", [a, g.i64([1, seq, hidden])], out="view")
    a = conv1d(a, hidden, hidden, "attn.c_proj")
    x = g.op("Add", [a, residual], out="add")

    residual = x
    h = g.layer_norm(x, hidden, "ln_2")
    h = g.gelu_tanh(conv1d(h, hidden, 4 * hidden, "mlp.c_fc"))
    h = conv1d(h, 4 * hidden, hidden, "mlp.c_proj")
    x = g.op("Add", [residual, h], out="add")
    g.output(x, F32, [1, seq, hidden], rename="output")
    return Built(g.model(doc="GPT-2 block, HF GPT2Block layout, dynamo-style decomposition"),
                 [normal_input("hidden_states", [1, seq, hidden])],
                 made=f"onnx.helper, HF GPT2Block (hidden {hidden}, {heads} heads, seq {seq}) as torch 2.x dynamo "
                      "export writes it: fused QKV Conv1D as Reshape/Gemm/Reshape + Split, causal mask as Slice of the "
                      "[1,1,1024,1024] bool buffer + Where(-inf), tanh Gelu decomposed (Pow 3, Mul 0.044715, Add, "
                      "Mul sqrt(2/pi), Tanh, Add 1, Mul, Mul 0.5)",
                 extra={"seq": seq, "hidden": hidden, "heads": heads})


# --- LLaMA-style decoder block (HF LlamaDecoderLayer, sdpa attention) ----------------
def llama_block(seq=128, hidden=1024, heads=16, kv_heads=4, ffn=2816, max_pos=2048, seed=3):
    g = GraphWriter("llama_block", seed)
    head_dim = hidden // heads
    rep = heads // kv_heads
    x = g.input("hidden_states", F32, [1, seq, hidden])
    pos_ids = g.input("position_ids", TensorProto.INT64, [1, seq])

    def rms_norm(t, prefix, eps=1e-6):
        w = g.tensor(prefix + ".weight", (1.0 + 0.1 * g.rng.standard_normal(hidden)).astype(np.float32))
        var = g.op("Pow", [t, g.const(2.0)], out="pow")
        var = g.op("ReduceMean", [var, g.i64([-1])], out="mean", keepdims=1)
        r = g.op("Add", [var, g.const(eps)], out="add")
        r = g.op("Sqrt", [r], out="rsqrt")
        r = g.op("Reciprocal", [r], out="rsqrt")
        t = g.op("Mul", [t, r], out="mul")
        return g.op("Mul", [w, t], out="mul")

    def proj(t, n_in, n_out, prefix):
        return g.op("MatMul", [t, g.weight(prefix + ".weight", [n_in, n_out], fan_in=n_in)], out="linear")

    def heads_view(t, n):
        t = g.op("Reshape", [t, g.i64([1, seq, n, head_dim])], out="view")
        return g.op("Transpose", [t], out="transpose", perm=[0, 2, 1, 3])

    # Rotary tables (the cos/sin cache buffers, [max_pos, head_dim]) indexed by position.
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    freqs = np.outer(np.arange(max_pos, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos_t = g.tensor("rotary_emb.cos_cached", np.cos(emb).astype(np.float32))
    sin_t = g.tensor("rotary_emb.sin_cached", np.sin(emb).astype(np.float32))
    cos = g.op("Unsqueeze", [g.op("Gather", [cos_t, pos_ids], out="index", axis=0), g.i64([1])], out="unsqueeze")
    sin = g.op("Unsqueeze", [g.op("Gather", [sin_t, pos_ids], out="index", axis=0), g.i64([1])], out="unsqueeze")

    def rotate(t):
        """q * cos + rotate_half(q) * sin, rotate_half = cat(-x2, x1)."""
        half = head_dim // 2
        x1 = g.op("Slice", [t, g.i64([0]), g.i64([half]), g.i64([3]), g.i64([1])], out="slice")
        x2 = g.op("Slice", [t, g.i64([half]), g.i64([2**63 - 1]), g.i64([3]), g.i64([1])], out="slice")
        rh = g.op("Concat", [g.op("Neg", [x2], out="neg"), x1], out="cat", axis=-1)
        return g.op("Add", [g.op("Mul", [t, cos], out="mul"), g.op("Mul", [rh, sin], out="mul")], out="add")

    def repeat_kv(t):
        """t[:, :, None].expand(b, kv, rep, s, d).reshape(b, kv * rep, s, d)."""
        t = g.op("Unsqueeze", [t, g.i64([2])], out="unsqueeze")
        t = g.op("Expand", [t, g.i64([1, kv_heads, rep, seq, head_dim])], out="expand")
        return g.op("Reshape", [t, g.i64([1, heads, seq, head_dim])], out="view")

    residual = x
    h = rms_norm(x, "input_layernorm")
    q = rotate(heads_view(proj(h, hidden, hidden, "self_attn.q_proj"), heads))
    k = rotate(heads_view(proj(h, hidden, kv_heads * head_dim, "self_attn.k_proj"), kv_heads))
    v = heads_view(proj(h, hidden, kv_heads * head_dim, "self_attn.v_proj"), kv_heads)
    causal = g.tensor("causal_mask", causal_mask_bool(seq)[None, None])
    a = g.sdpa(q, repeat_kv(k), repeat_kv(v), head_dim, bool_mask=causal)
    a = g.op("Transpose", [a], out="transpose", perm=[0, 2, 1, 3])
    a = g.op("Reshape", [a, g.i64([1, seq, hidden])], out="reshape")
    x = g.op("Add", [residual, proj(a, hidden, hidden, "self_attn.o_proj")], out="add")

    residual = x
    h = rms_norm(x, "post_attention_layernorm")
    gate = proj(h, hidden, ffn, "mlp.gate_proj")
    gate = g.op("Mul", [gate, g.op("Sigmoid", [gate], out="silu")], out="silu")
    up = proj(h, hidden, ffn, "mlp.up_proj")
    h = proj(g.op("Mul", [gate, up], out="mul"), ffn, hidden, "mlp.down_proj")
    x = g.op("Add", [residual, h], out="add")
    g.output(x, F32, [1, seq, hidden], rename="output")
    return Built(g.model(doc="LLaMA-style decoder block, HF LlamaDecoderLayer layout, dynamo-style decomposition"),
                 [normal_input("hidden_states", [1, seq, hidden]),
                  integer_input("position_ids", [1, seq], 0, max_pos)],
                 made=f"onnx.helper, HF LlamaDecoderLayer (hidden {hidden}, {heads} query / {kv_heads} KV heads of "
                      f"{head_dim}, SwiGLU {ffn}, seq {seq}) as torch 2.x dynamo export writes it: RMSNorm as "
                      "Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul/Mul, rotary as Gather of cos/sin caches by position_ids "
                      "+ Slice/Neg/Concat/Mul/Add, GQA as Unsqueeze/Expand/Reshape, sdpa decomposed with the scale as "
                      "Mul by sqrt(scale) on q and on k^T, causal bool mask via Where(0, -inf) + Add",
                 extra={"seq": seq, "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "ffn": ffn})

