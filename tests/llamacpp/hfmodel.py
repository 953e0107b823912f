"""The reference side of the llama.cpp fixtures: a tiny Llama with the
module names and the arithmetic of Hugging Face's LlamaForCausalLM
(modeling_llama: RMSNorm in float32, rotate-half RoPE applied by
apply_rotary_pos_emb, grouped-query attention, SwiGLU MLP, optional
biases), built from a state dict of numpy arrays; with experts > 0 the
MLP is Mixtral's sparse mixture of experts (modeling_mixtral of
transformers 4.x: block_sparse_moe with a gate Linear router and experts
E.w1, w2, w3; softmax, top-k, the k weights renormalised).  No transformers: the
machine that makes the fixtures has torch from Debian only.

dump_hf.py records it with forward hooks, as it records a real HF model;
--replay finds apply_rotary_pos_emb in this module as it finds it in
modeling_llama.
"""

import math

import numpy as np
import torch
from torch import nn


class Config:
    def __init__(self, hidden=64, heads=8, kv_heads=2, head_dim=8, inter=128, layers=2, vocab=259,
                 eps=1e-5, theta=10000.0, mlp_bias=False, experts=0, experts_used=2):
        self.hidden, self.heads, self.kv_heads, self.head_dim = hidden, heads, kv_heads, head_dim
        self.inter, self.layers, self.vocab = inter, layers, vocab
        self.eps, self.theta, self.mlp_bias = eps, theta, mlp_bias
        self.experts, self.experts_used = experts, experts_used


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), -1)


def apply_rotary_pos_emb(q, k, cos, sin):
    """modeling_llama's step: q, k [B, heads, S, D] rotated by cos, sin [S, D]."""
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.hidden, c.heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)

    def forward(self, x, cos, sin):
        c = self.c
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, c.heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, c.kv_heads, c.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = k.repeat_interleave(c.heads // c.kv_heads, dim=1)
        v = v.repeat_interleave(c.heads // c.kv_heads, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(c.head_dim)
        mask = torch.full((s, s), float("-inf")).triu(1)
        out = torch.softmax(scores + mask, -1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, s, c.heads * c.head_dim)), None


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden, c.inter, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.inter, bias=False)
        self.down_proj = nn.Linear(c.inter, c.hidden, bias=c.mlp_bias)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Expert(nn.Module):
    """MixtralBlockSparseTop2MLP: w1 the gate, w3 the up, w2 the down projection."""

    def __init__(self, c):
        super().__init__()
        self.w1 = nn.Linear(c.hidden, c.inter, bias=False)
        self.w2 = nn.Linear(c.inter, c.hidden, bias=False)
        self.w3 = nn.Linear(c.hidden, c.inter, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class SparseMoeBlock(nn.Module):
    """MixtralSparseMoeBlock's forward: the router's logits over the
    flattened tokens, softmax in float32, torch.topk, the k weights
    divided by their sum in place, each expert run on its tokens and
    index_add_-ed in; returns (output, router_logits)."""

    def __init__(self, c):
        super().__init__()
        self.top_k = c.experts_used
        self.num_experts = c.experts
        self.gate = nn.Linear(c.hidden, c.experts, bias=False)
        self.experts = nn.ModuleList(Expert(c) for _ in range(c.experts))

    def forward(self, x):
        b, s, h = x.shape
        x = x.view(-1, h)
        router_logits = self.gate(x)
        routing_weights = nn.functional.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(x.dtype)
        out = torch.zeros((b * s, h), dtype=x.dtype)
        mask = nn.functional.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        for e in range(self.num_experts):
            idx, top_x = torch.where(mask[e])
            y = self.experts[e](x[None, top_x].reshape(-1, h)) * routing_weights[top_x, idx, None]
            out.index_add_(0, top_x, y.to(x.dtype))
        return out.reshape(b, s, h), router_logits


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden, c.eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.eps)
        if c.experts:
            self.block_sparse_moe = SparseMoeBlock(c)
        else:
            self.mlp = MLP(c)

    def forward(self, x, cos, sin):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin)[0]
        x = self.post_attention_layernorm(h)
        if hasattr(self, "block_sparse_moe"):
            return (h + self.block_sparse_moe(x)[0],)
        return (h + self.mlp(x),)


class LlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden, c.eps)

    def forward(self, ids):
        c = self.c
        s = ids.shape[-1]
        inv = 1.0 / (c.theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float32) / c.head_dim))
        ang = torch.arange(s, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat((ang, ang), -1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)[0]
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c.hidden, c.vocab, bias=False)

    def forward(self, ids):
        return self.lm_head(self.model(ids))


def build(c, state):
    """The model with the weights of state ({HF parameter name: numpy array})."""
    m = LlamaForCausalLM(c)
    own = dict(m.named_parameters())
    if set(own) != set(state):
        raise ValueError("state dict and model differ: %s" % sorted(set(own) ^ set(state)))
    with torch.no_grad():
        for name, p in own.items():
            p.copy_(torch.from_numpy(np.ascontiguousarray(state[name], dtype=np.float32)))
    return m.eval()
