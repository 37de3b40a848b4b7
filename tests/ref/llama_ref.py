#!/usr/bin/env python3
"""The NumPy reference forward pass that sieve's CPU backend is judged against.

    llama_ref.py MODEL --ids 1,2,3 [--greedy N] [--out LOGITS.f32]

MODEL is a GGUF file (any tensor type the gguf package can dequantize, e.g. the default Q4_1
SmolLM2) or a Hugging Face folder (config.json + model.safetensors). Architectures: llama,
qwen2 (Q/K/V biases), qwen3 (an RMSNorm of every Q and K head before RoPE) and gemma3 (text
only; below). Written from the architecture's definition, not from sieve: it shares no
code and no layout decisions with src/, and computes in float64 so its own rounding is far below
the tolerances the tests hold sieve to (the weights are what the file stores, dequantized to
float32 exactly as ggml does, then widened).

One layer, for the hidden states x (n, hidden) of tokens at positions p:
    h = rmsnorm(x) * attn_norm
    q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)      split into heads of head_dim
    qwen3: q, k = rmsnorm(q) * q_norm, rmsnorm(k) * k_norm   over each head's head_dim
    q, k = rope(q, p), rope(k, p)
    head j of q attends to KV head j // (n_heads / n_kv_heads) over positions <= its own,
    softmax(q k^T / sqrt(head_dim)) v
    x = x + concat(heads) Wo^T
    x = x + Wdown^T (silu(h2 Wgate^T) * (h2 Wup^T)),  h2 = rmsnorm(x) * ffn_norm
then logits = rmsnorm(x) * output_norm  W_out^T, W_out the embeddings when there is no output
matrix (tied). rmsnorm(x) = x / sqrt(mean(x^2) + eps).

RoPE rotates dimension pairs by angle p * theta^(-2i/head_dim), i = 0 .. head_dim/2 - 1:
  "pairs"  (llama.cpp's normal mode: GGUF "llama") pairs (2i, 2i+1);
  "halves" (NeoX / HF rotate_half: every HF checkpoint, GGUF "qwen2", "qwen3", "gemma3") pairs
           (i, i + head_dim/2).
(make_tiny_llama.py's docstring explains why the two describe the same model.)

Gemma 3 (GGUF "gemma3", HF model_type "gemma3_text", as transformers' modeling_gemma3.py):
    x = embed[ids] * float32(sqrt(hidden))          (a float32 scalar in HF and in llama.cpp)
    per layer, local ("sliding_attention") or global ("full_attention"):
    h = rmsnorm(x) * attn_norm;  q, k, v = h Wq^T, h Wk^T, h Wv^T     no biases
    q, k = rmsnorm(q) * q_norm, rmsnorm(k) * k_norm   over each head's head_dim
    q, k = rope(q, p'), rope(k, p')   "halves"; local layers theta_local (10000) and p' = p;
                                      global ones theta and p' = p / rope_factor (linear scaling)
    softmax(attn_scale * q k^T) v over keys j <= i, and on local layers only i - j < window
        (transformers' sliding_window_overlay: kv_idx > q_idx - sliding_window; llama.cpp's
        standard SWA masks p1 - p0 >= n_swa: the query and the window - 1 keys before it)
    x = x + rmsnorm(concat(heads) Wo^T) * post_attn_norm
    h2 = rmsnorm(x) * ffn_norm
    x = x + rmsnorm(Wdown^T (gelu_tanh(h2 Wgate^T) * (h2 Wup^T))) * post_ffn_norm
then logits = rmsnorm(x) * output_norm  E^T (always tied), with
gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))). Every Gemma norm multiplies by
(1 + w) for the HF weight w; llama.cpp's converter stores 1 + w, so HF norm weights get 1 added
at load and GGUF ones are used as stored. Which layers are local: HF config layer_types, else
sliding_window_pattern P (default 6: layer i is global iff (i + 1) % P == 0); a GGUF has no key
for it, llama.cpp hard-codes P = 6. attn_scale: HF query_pre_attn_scalar^-0.5; a GGUF does not
store it, llama.cpp uses 1/sqrt(head_dim), or 1/sqrt(hidden // heads) for the 62-layer 27B. HF
rope_theta / rope_local_base_freq / rope_scaling (older configs) or rope_parameters
{"full_attention": ..., "sliding_attention": ...} (transformers 5); GGUF rope.freq_base is the
global theta, rope.scaling.factor (type linear) the global layers' factor, local theta 10000.
Not implemented (refused): logit soft-capping, bidirectional attention, other RoPE types.

API: load(path) -> Model; logits(model, ids) -> (n, vocab) float64; greedy(model, ids, steps)
-> generated ids (argmax, lowest id on ties); run(model, ids, steps) -> (prompt logits,
generated ids, top-1 minus top-2 logit at each step). Generation keeps a KV cache.
"""
import argparse
import json
import os
import pathlib
import sys
from dataclasses import dataclass, field

# Decoding is one matrix-vector product per weight: memory-bound, and OpenBLAS threads only
# contend (10x slower on a busy 2-core machine). Takes effect only if numpy is not yet imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ARCHS = ("llama", "qwen2", "qwen3", "gemma3")
GEMMA3_PATTERN = 6           # llama.cpp: in a "gemma3" GGUF, layer i is global iff i % 6 == 5


@dataclass
class Layer:
    attn_norm: np.ndarray              # (hidden,)
    wq: np.ndarray                     # (n_heads * head_dim, hidden)
    wk: np.ndarray                     # (n_kv_heads * head_dim, hidden)
    wv: np.ndarray                     # (n_kv_heads * head_dim, hidden)
    wo: np.ndarray                     # (hidden, n_heads * head_dim)
    ffn_norm: np.ndarray               # (hidden,)
    w_gate: np.ndarray                 # (ffn, hidden)
    w_up: np.ndarray                   # (ffn, hidden)
    w_down: np.ndarray                 # (hidden, ffn)
    bq: np.ndarray | None = None       # (n_heads * head_dim,)    qwen2
    bk: np.ndarray | None = None       # (n_kv_heads * head_dim,) qwen2
    bv: np.ndarray | None = None       # (n_kv_heads * head_dim,) qwen2
    q_norm: np.ndarray | None = None   # (head_dim,)              qwen3, gemma3
    k_norm: np.ndarray | None = None   # (head_dim,)              qwen3, gemma3
    post_attn_norm: np.ndarray | None = None   # (hidden,) gemma3: of the attention output, before the add
    post_ffn_norm: np.ndarray | None = None    # (hidden,) gemma3: of the FFN output, before the add
    sliding: bool = False              # gemma3: a local layer (Model.window, Model.theta_local)


@dataclass
class Model:
    arch: str
    rope: str                          # "pairs" or "halves"
    n_heads: int
    n_kv_heads: int
    head_dim: int
    eps: float
    theta: float
    embed: np.ndarray                  # (vocab, hidden)
    layers: list = field(default_factory=list)
    out_norm: np.ndarray = None        # (hidden,)
    out: np.ndarray = None             # (vocab, hidden); the embeddings when tied
    act: str = "silu"                  # FFN gate activation: "silu" or "gelu_tanh" (gemma3)
    embed_scale: float = 1.0           # the embeddings are multiplied by it (gemma3 float32(sqrt(hidden)))
    attn_scale: float | None = None    # scores = q.k * attn_scale; None: / sqrt(head_dim)
    window: int | None = None          # sliding layers: query i sees key j iff 0 <= i - j < window
    theta_local: float | None = None   # RoPE theta of the sliding layers (theta: the others')
    rope_factor: float = 1.0           # linear RoPE scaling of the non-sliding layers: p -> p / factor

    @property
    def vocab(self):
        return self.out.shape[0]


# ---- loading --------------------------------------------------------------------------------


def _f64(a):
    return np.ascontiguousarray(a, dtype=np.float64)


def _check(m):
    hidden = m.embed.shape[1]
    if m.arch not in ARCHS:
        raise ValueError("architecture %r is not supported (%s are)" % (m.arch, ", ".join(ARCHS)))
    if m.n_heads % m.n_kv_heads or m.head_dim % 2:
        raise ValueError("heads %d / kv heads %d / head_dim %d" % (m.n_heads, m.n_kv_heads, m.head_dim))
    for i, L in enumerate(m.layers):
        want = {"wq": (m.n_heads * m.head_dim, hidden), "wk": (m.n_kv_heads * m.head_dim, hidden),
                "wv": (m.n_kv_heads * m.head_dim, hidden), "wo": (hidden, m.n_heads * m.head_dim),
                "attn_norm": (hidden,), "ffn_norm": (hidden,), "w_down": (hidden, L.w_gate.shape[0]),
                "w_up": L.w_gate.shape, "w_gate": (L.w_gate.shape[0], hidden)}
        if m.arch in ("qwen3", "gemma3"):
            want.update(q_norm=(m.head_dim,), k_norm=(m.head_dim,))
        elif L.q_norm is not None or L.k_norm is not None:
            raise ValueError("layer %d: q/k norms outside qwen3 and gemma3" % i)
        if m.arch == "gemma3":
            want.update(post_attn_norm=(hidden,), post_ffn_norm=(hidden,))
            if L.bq is not None or L.bk is not None or L.bv is not None:
                raise ValueError("layer %d: gemma3 with Q/K/V biases is not implemented" % i)
            if L.sliding and not (m.window and m.window > 0 and m.theta_local):
                raise ValueError("layer %d is a sliding layer but window %r / local theta %r" % (
                    i, m.window, m.theta_local))
        elif L.post_attn_norm is not None or L.post_ffn_norm is not None or L.sliding:
            raise ValueError("layer %d: post norms or a sliding window outside gemma3" % i)
        for name, shape in want.items():
            if getattr(L, name).shape != shape:
                raise ValueError("layer %d %s: shape %s, expected %s" % (i, name, getattr(L, name).shape, shape))
    if m.out.shape[1] != hidden or m.out_norm.shape != (hidden,):
        raise ValueError("output shapes %s %s" % (m.out.shape, m.out_norm.shape))
    return m


def load_gguf(path, rope=None):
    import gguf
    from gguf.quants import dequantize

    r = gguf.GGUFReader(str(path))

    def meta(key, default=None):
        f = r.fields.get(key)
        if f is None:
            if default is None:
                raise KeyError("%s: no %s" % (path, key))
            return default
        return f.contents()

    arch = meta("general.architecture")
    if arch not in ARCHS:
        raise ValueError("%s: architecture %r is not supported (%s are)" % (path, arch, ", ".join(ARCHS)))
    scaling = r.fields.get(arch + ".rope.scaling.type")
    scaling = None if scaling is None else scaling.contents()
    rope_factor = 1.0
    if arch == "gemma3" and scaling in (None, "linear"):
        # llama.cpp reads the factor whatever the type (linear is the default); 0 means none
        rope_factor = float(meta(arch + ".rope.scaling.factor", 0.0)) or 1.0
    elif scaling is not None and scaling not in ("none", ""):
        raise ValueError("%s: RoPE scaling %r is not implemented" % (path, scaling))

    tensors = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type)
        # t.shape is ggml's ne (fastest dimension first); numpy wants it reversed.
        tensors[t.name] = _f64(a.reshape(tuple(int(d) for d in reversed(t.shape))))

    hidden = int(meta(arch + ".embedding_length"))
    n_heads = int(meta(arch + ".attention.head_count"))
    head_dim = int(meta(arch + ".attention.key_length", hidden // n_heads))
    rot = int(meta(arch + ".rope.dimension_count", head_dim))
    if rot != head_dim:
        raise ValueError("%s: partial rotary (%d of %d dims) is not implemented" % (path, rot, head_dim))
    m = Model(arch=arch, rope=rope or ("pairs" if arch == "llama" else "halves"), n_heads=n_heads,
              n_kv_heads=int(meta(arch + ".attention.head_count_kv", n_heads)), head_dim=head_dim,
              eps=float(meta(arch + ".attention.layer_norm_rms_epsilon")),
              theta=float(meta(arch + ".rope.freq_base", 10000.0)), embed=tensors.pop("token_embd.weight"))
    n_layers = int(meta(arch + ".block_count"))
    if arch == "gemma3":
        # llama.cpp: theta 10000 and no scaling on the local layers; the attention scale is not
        # stored (1/sqrt(head_dim), but 1/sqrt(hidden // heads) for the 62-layer 27B model)
        m.act, m.embed_scale, m.rope_factor = "gelu_tanh", float(np.float32(np.sqrt(hidden))), rope_factor
        m.window, m.theta_local = int(meta(arch + ".attention.sliding_window")), 10000.0
        m.attn_scale = 1.0 / np.sqrt(hidden // n_heads if n_layers == 62 else head_dim)
    for i in range(n_layers):
        b = "blk.%d." % i
        m.layers.append(Layer(
            attn_norm=tensors.pop(b + "attn_norm.weight"), wq=tensors.pop(b + "attn_q.weight"),
            wk=tensors.pop(b + "attn_k.weight"), wv=tensors.pop(b + "attn_v.weight"),
            wo=tensors.pop(b + "attn_output.weight"), ffn_norm=tensors.pop(b + "ffn_norm.weight"),
            w_gate=tensors.pop(b + "ffn_gate.weight"), w_up=tensors.pop(b + "ffn_up.weight"),
            w_down=tensors.pop(b + "ffn_down.weight"), bq=tensors.pop(b + "attn_q.bias", None),
            bk=tensors.pop(b + "attn_k.bias", None), bv=tensors.pop(b + "attn_v.bias", None),
            q_norm=tensors.pop(b + "attn_q_norm.weight", None), k_norm=tensors.pop(b + "attn_k_norm.weight", None),
            post_attn_norm=tensors.pop(b + "post_attention_norm.weight", None),
            post_ffn_norm=tensors.pop(b + "post_ffw_norm.weight", None),
            sliding=arch == "gemma3" and i % GEMMA3_PATTERN != GEMMA3_PATTERN - 1))
    m.out_norm = tensors.pop("output_norm.weight")
    m.out = tensors.pop("output.weight", m.embed)
    if tensors:
        raise ValueError("%s: tensors not understood: %s" % (path, ", ".join(sorted(tensors)[:8])))
    return _check(m)


def load_hf(folder, rope=None):
    from safetensors.numpy import load_file

    folder = pathlib.Path(folder)
    cfg = json.loads((folder / "config.json").read_text())
    arch = cfg.get("model_type") or {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
                                     "Qwen3ForCausalLM": "qwen3", "Gemma3ForCausalLM": "gemma3_text"}.get(
        (cfg.get("architectures") or [""])[0])
    if arch == "gemma3":       # HF "gemma3" is the image-text model (text_config, language_model.*)
        raise ValueError("%s: model_type 'gemma3' (multimodal) is not supported; 'gemma3_text' is" % folder)
    arch = {"gemma3_text": "gemma3"}.get(arch, arch)
    if arch not in ARCHS:
        raise ValueError("%s: model_type %r is not supported (%s are)" % (folder, arch, ", ".join(ARCHS)))
    if arch != "gemma3":
        if cfg.get("rope_scaling"):
            raise ValueError("%s: rope_scaling %r is not implemented" % (folder, cfg["rope_scaling"]))
        if cfg.get("hidden_act", "silu") != "silu":
            raise ValueError("%s: hidden_act %r is not implemented" % (folder, cfg["hidden_act"]))
    t = {k: _f64(v) for k, v in load_file(str(folder / "model.safetensors")).items()}
    n_heads = int(cfg["num_attention_heads"])
    gemma = arch == "gemma3"
    if gemma:
        # Gemma3RMSNorm computes x / sqrt(mean(x^2) + eps) * (1 + w): the multiplier is 1 + w
        for k in t:
            if k.endswith("norm.weight"):
                t[k] = 1.0 + t[k]
    m = Model(arch=arch, rope=rope or "halves", n_heads=n_heads,
              n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads),
              head_dim=int(cfg.get("head_dim") or (256 if gemma else cfg["hidden_size"] // n_heads)),
              eps=float(cfg["rms_norm_eps"]), theta=float(cfg.get("rope_theta", 10000.0)),
              embed=t.pop("model.embed_tokens.weight"))
    n_layers = int(cfg["num_hidden_layers"])
    sliding = [False] * n_layers
    if gemma:
        sliding = _gemma3_hf_config(m, cfg, n_layers, folder)
    for i in range(n_layers):
        p = "model.layers.%d." % i
        m.layers.append(Layer(
            attn_norm=t.pop(p + "input_layernorm.weight"), wq=t.pop(p + "self_attn.q_proj.weight"),
            wk=t.pop(p + "self_attn.k_proj.weight"), wv=t.pop(p + "self_attn.v_proj.weight"),
            wo=t.pop(p + "self_attn.o_proj.weight"),
            ffn_norm=t.pop(p + ("pre_feedforward_layernorm.weight" if gemma else "post_attention_layernorm.weight")),
            w_gate=t.pop(p + "mlp.gate_proj.weight"), w_up=t.pop(p + "mlp.up_proj.weight"),
            w_down=t.pop(p + "mlp.down_proj.weight"), bq=t.pop(p + "self_attn.q_proj.bias", None),
            bk=t.pop(p + "self_attn.k_proj.bias", None), bv=t.pop(p + "self_attn.v_proj.bias", None),
            q_norm=t.pop(p + "self_attn.q_norm.weight", None), k_norm=t.pop(p + "self_attn.k_norm.weight", None),
            post_attn_norm=t.pop(p + "post_attention_layernorm.weight") if gemma else None,
            post_ffn_norm=t.pop(p + "post_feedforward_layernorm.weight") if gemma else None,
            sliding=sliding[i]))
    m.out_norm = t.pop("model.norm.weight")
    lm_head = t.pop("lm_head.weight", None)
    m.out = m.embed if cfg.get("tie_word_embeddings", lm_head is None) else lm_head
    if m.out is None:
        raise ValueError("%s: tie_word_embeddings is false but there is no lm_head.weight" % folder)
    if t:
        raise ValueError("%s: tensors not understood: %s" % (folder, ", ".join(sorted(t)[:8])))
    return _check(m)


def _gemma3_hf_config(m, cfg, n_layers, folder):
    """Sets m's Gemma 3 fields from a gemma3_text config.json (with Gemma3TextConfig's defaults);
    returns the per-layer sliding flags."""
    for key in ("final_logit_softcapping", "attn_logit_softcapping"):
        if cfg.get(key) is not None:
            raise ValueError("%s: %s %r is not implemented" % (folder, key, cfg[key]))
    if cfg.get("use_bidirectional_attention"):
        raise ValueError("%s: use_bidirectional_attention is not implemented" % folder)
    act = cfg.get("hidden_activation", "gelu_pytorch_tanh")
    if act not in ("gelu_pytorch_tanh", "gelu_python_tanh"):
        raise ValueError("%s: hidden_activation %r is not implemented" % (folder, act))
    types = cfg.get("layer_types")         # the current form; wins over sliding_window_pattern
    if types is None:
        pattern = int(cfg.get("sliding_window_pattern", 6))
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)]
    if len(types) != n_layers or not set(types) <= {"sliding_attention", "full_attention"}:
        raise ValueError("%s: layer_types %r" % (folder, types))
    # RoPE: transformers 5 writes rope_parameters per layer type; older configs rope_theta,
    # rope_local_base_freq and rope_scaling (which applies to the full-attention layers only)
    rp = cfg.get("rope_parameters")
    if rp is None:
        full, local = {}, {}
    elif isinstance(rp, dict) and set(rp) <= {"full_attention", "sliding_attention"}:
        full, local = dict(rp.get("full_attention") or {}), dict(rp.get("sliding_attention") or {})
    else:
        raise ValueError("%s: rope_parameters %r is not per layer type" % (folder, rp))
    full.update(cfg.get("rope_scaling") or {})
    full.setdefault("rope_theta", cfg.get("rope_theta", 1e6))
    local.setdefault("rope_theta", cfg.get("rope_local_base_freq", 1e4))
    for name, d in (("full_attention", full), ("sliding_attention", local)):
        kind = d.get("rope_type", d.get("type", "default"))
        if kind not in (("default", "linear") if name == "full_attention" else ("default",)):
            raise ValueError("%s: %s RoPE type %r is not implemented" % (folder, name, kind))
        if float(d.get("partial_rotary_factor", cfg.get("partial_rotary_factor") or 1.0)) != 1.0:
            raise ValueError("%s: partial rotary is not implemented" % folder)
    if full.get("rope_type", full.get("type")) == "linear":
        m.rope_factor = float(full["factor"])
    m.theta, m.theta_local = float(full["rope_theta"]), float(local["rope_theta"])
    m.window = cfg.get("sliding_window", 4096)
    if "sliding_attention" in types and not m.window:
        raise ValueError("%s: sliding layers but sliding_window %r" % (folder, m.window))
    m.window = int(m.window) if m.window else None
    m.act = "gelu_tanh"
    m.embed_scale = float(np.float32(np.sqrt(cfg["hidden_size"])))   # torch.tensor(hidden**0.5): float32
    m.attn_scale = float(cfg.get("query_pre_attn_scalar", 256)) ** -0.5
    return [x == "sliding_attention" for x in types]


def load(path, rope=None):
    """A GGUF file or an HF folder. rope overrides the RoPE layout ("pairs"/"halves"); the
    default is the one the format implies (tests use the override to show it matters)."""
    p = pathlib.Path(path)
    return load_hf(p, rope) if p.is_dir() else load_gguf(p, rope)


# ---- the forward pass -----------------------------------------------------------------------


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, theta, layout):
    """x (n, heads, d) at positions pos (n,): each pair rotated by pos * theta^(-2i/d)."""
    d = x.shape[-1]
    ang = pos[:, None].astype(np.float64) * theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]        # (n, 1, d/2)
    if layout == "pairs":
        a, b = x[..., 0::2], x[..., 1::2]
    elif layout == "halves":
        a, b = x[..., : d // 2], x[..., d // 2:]
    else:
        raise ValueError("rope layout %r" % layout)
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = np.empty_like(x)
    if layout == "pairs":
        out[..., 0::2], out[..., 1::2] = ra, rb
    else:
        out[..., : d // 2], out[..., d // 2:] = ra, rb
    return out


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    """GELU's tanh approximation (HF "gelu_pytorch_tanh", ggml_gelu)."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x * x * x)))


ACTS = {"silu": silu, "gelu_tanh": gelu_tanh}


class Cache:
    """Keys and values of every position seen so far, per layer: (n_kv_heads, positions, head_dim)."""

    def __init__(self, m):
        self.k = [np.zeros((m.n_kv_heads, 0, m.head_dim)) for _ in m.layers]
        self.v = [np.zeros((m.n_kv_heads, 0, m.head_dim)) for _ in m.layers]
        self.n = 0


def forward(m, ids, cache):
    """Logits (len(ids), vocab) for ids at positions cache.n, cache.n + 1, ...; extends cache."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or len(ids) == 0 or ids.min() < 0 or ids.max() >= m.embed.shape[0]:
        raise ValueError("token ids must be 1..n ids in [0, %d)" % m.embed.shape[0])
    n, hd, group = len(ids), m.head_dim, m.n_heads // m.n_kv_heads
    pos = np.arange(cache.n, cache.n + n)
    act = ACTS[m.act]
    x = m.embed[ids]                                                    # (n, hidden)
    if m.embed_scale != 1.0:
        x = x * m.embed_scale
    for li, L in enumerate(m.layers):
        h = rmsnorm(x, L.attn_norm, m.eps)
        q, k, v = h @ L.wq.T, h @ L.wk.T, h @ L.wv.T
        if L.bq is not None:
            q, k, v = q + L.bq, k + L.bk, v + L.bv
        q, k = q.reshape(n, m.n_heads, hd), k.reshape(n, m.n_kv_heads, hd)
        if L.q_norm is not None:
            q, k = rmsnorm(q, L.q_norm, m.eps), rmsnorm(k, L.k_norm, m.eps)
        if L.sliding:
            theta, rpos = m.theta_local, pos
        else:
            theta, rpos = m.theta, (pos if m.rope_factor == 1.0 else pos / m.rope_factor)
        q = rope(q, rpos, theta, m.rope)
        k = rope(k, rpos, theta, m.rope)
        v = v.reshape(n, m.n_kv_heads, hd)
        K = cache.k[li] = np.concatenate([cache.k[li], k.transpose(1, 0, 2)], axis=1)   # (kv, T, hd)
        V = cache.v[li] = np.concatenate([cache.v[li], v.transpose(1, 0, 2)], axis=1)
        T = K.shape[1]
        # query heads grouped under their KV head: (kv, group, n, hd)
        qg = q.transpose(1, 0, 2).reshape(m.n_kv_heads, group, n, hd)
        s = np.einsum("kgnd,ktd->kgnt", qg, K)
        s = s / np.sqrt(hd) if m.attn_scale is None else s * m.attn_scale
        seen = np.arange(T)[None, :] <= pos[:, None]                    # causal
        if L.sliding:
            seen &= pos[:, None] - np.arange(T)[None, :] < m.window
        s = np.where(seen, s, -np.inf)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        p = s / s.sum(axis=-1, keepdims=True)
        o = np.einsum("kgnt,ktd->kgnd", p, V).reshape(m.n_heads, n, hd).transpose(1, 0, 2)
        o = o.reshape(n, m.n_heads * hd) @ L.wo.T
        if L.post_attn_norm is not None:
            o = rmsnorm(o, L.post_attn_norm, m.eps)
        x = x + o
        h = rmsnorm(x, L.ffn_norm, m.eps)
        f = (act(h @ L.w_gate.T) * (h @ L.w_up.T)) @ L.w_down.T
        if L.post_ffn_norm is not None:
            f = rmsnorm(f, L.post_ffn_norm, m.eps)
        x = x + f
    cache.n += n
    return rmsnorm(x, m.out_norm, m.eps) @ m.out.T


def logits(m, ids):
    return forward(m, ids, Cache(m))


def run(m, ids, steps):
    """(logits of the prompt (n, vocab), the `steps` greedy ids, top-1 minus top-2 logit of each
    step's choice). argmax takes the lowest id on ties."""
    cache = Cache(m)
    prompt = forward(m, ids, cache)
    row, out, margins = prompt[-1], [], []
    for step in range(steps):
        t = int(np.argmax(row))
        top2 = np.partition(row, -2)[-2:]
        out.append(t)
        margins.append(float(top2[1] - top2[0]))
        if step + 1 < steps:
            row = forward(m, [t], cache)[-1]
    return prompt, out, margins


def greedy(m, ids, steps):
    return run(m, ids, steps)[1]


# ---- command line ---------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description="NumPy reference forward pass (llama, qwen2, qwen3, gemma3)")
    ap.add_argument("model", help="GGUF file or HF folder (config.json + model.safetensors)")
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--greedy", type=int, default=0, metavar="N", help="print N greedy ids")
    ap.add_argument("--out", help="write the prompt's logits as little-endian float32 (n, vocab)")
    ap.add_argument("--out64", help="the same as float64")
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object: vocab, n, greedy ids, top-2 margins (no summary)")
    a = ap.parse_args(argv)
    ids = [int(s) for s in a.ids.split(",") if s.strip()]
    m = load(a.model)
    prompt, gen, margins = run(m, ids, a.greedy)
    if a.out:
        prompt.astype("<f4").tofile(a.out)
    if a.out64:
        prompt.astype("<f8").tofile(a.out64)
    if a.json:
        print(json.dumps({"vocab": m.vocab, "n": len(ids), "greedy": gen, "margins": margins}))
        return 0
    print(json.dumps({"vocab": m.vocab, "n": len(ids)}))
    for i, row in enumerate(prompt):
        top = np.argsort(-row, kind="stable")[:3]
        print("pos %d id %d: argmax %s logits %s  min %.4f max %.4f mean %.4f" % (
            i, ids[i], top.tolist(), np.round(row[top], 4).tolist(), row.min(), row.max(), row.mean()))
    if a.greedy:
        print("greedy:", ",".join(map(str, gen)))
        print("smallest top-2 margin: %.4g (step %d)" % (min(margins), int(np.argmin(margins))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
