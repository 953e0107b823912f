"""A tiny Llama-style decoder for the dumper tests: the module names of
Hugging Face's LlamaForCausalLM (model.embed_tokens, model.layers.N.
{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
mlp.{gate,up,down}_proj}, model.norm, lm_head), seeded weights, no
transformers.  Attention and decoder layers return tuples, as HF's do.

build(bug=..., layer=...) injects one perturbation into one layer:
  mlp-activation   gelu instead of silu in that layer's MLP
  rope-style       interleaved RoPE pairs in that layer's attention
  norm-epsilon     RMSNorm epsilon 1e-2 in that layer's input norm
"""

import math

import torch
from torch import nn

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 32, 4, 2, 8, 64, 97


class RMSNorm(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(HIDDEN))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rope(x, interleaved):
    """x: [B, heads, S, D] rotated by position (HF rotate-half, or GPT-J pairs)."""
    s, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = torch.arange(s, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1).flatten(-2)
    cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
    rot = torch.cat((-x[..., d // 2:], x[..., : d // 2]), -1)
    return x * cos + rot * sin


def apply_rotary_pos_emb(q, k, interleaved):
    """Hugging Face's name for the step: dump_hf.py --replay records its (q, k)."""
    return rope(q, interleaved), rope(k, interleaved)


class Attention(nn.Module):
    def __init__(self, interleaved=False):
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.interleaved = interleaved

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k_proj(x).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v_proj(x).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, self.interleaved)
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)
        mask = torch.full((s, s), float("-inf"), dtype=scores.dtype).triu(1)
        out = torch.softmax(scores + mask, -1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, s, HEADS * HEAD_DIM)), None


class MLP(nn.Module):
    def __init__(self, gelu=False):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, INTER, bias=False)
        self.up_proj = nn.Linear(HIDDEN, INTER, bias=False)
        self.down_proj = nn.Linear(INTER, HIDDEN, bias=False)
        self.act_fn = nn.GELU() if gelu else nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, bug=None):
        super().__init__()
        self.input_layernorm = RMSNorm(1e-2 if bug == "norm-epsilon" else 1e-6)
        self.self_attn = Attention(interleaved=bug == "rope-style")
        self.post_attention_layernorm = RMSNorm()
        self.mlp = MLP(gelu=bug == "mlp-activation")

    def forward(self, x):
        h = x + self.self_attn(self.input_layernorm(x))[0]
        return (h + self.mlp(self.post_attention_layernorm(h)),)


class Decoder(nn.Module):
    def __init__(self, layers, bug, bug_layer):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(DecoderLayer(bug if i == bug_layer else None) for i in range(layers))
        self.norm = RMSNorm()

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)[0]
        return self.norm(x)


class TinyLlamaForCausalLM(nn.Module):
    def __init__(self, layers=3, bug=None, bug_layer=0):
        super().__init__()
        self.model = Decoder(layers, bug, bug_layer)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids):
        return self.lm_head(self.model(ids))


def build(bug=None, layer="1", layers="3", seed="0"):
    """The test model; string arguments, as dump_hf.py --factory-arg passes them."""
    torch.manual_seed(int(seed))
    m = TinyLlamaForCausalLM(int(layers), bug, int(layer))
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
    return m.eval()
