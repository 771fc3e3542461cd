"""Decompositions the backend adds to core ATen's: fused operators of torch's own fast paths,
written back as the operators they fuse, so that their pieces are lowered and scheduled
like any others."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch._decomp import core_aten_decompositions

aten = torch.ops.aten


def encoder_layer(src: torch.Tensor, embed_dim: int, num_heads: int, qkv_w: torch.Tensor,
                  qkv_b: torch.Tensor, proj_w: torch.Tensor, proj_b: torch.Tensor,
                  use_gelu: bool, norm_first: bool, eps: float, n1_w: torch.Tensor,
                  n1_b: torch.Tensor, n2_w: torch.Tensor, n2_b: torch.Tensor,
                  f1_w: torch.Tensor, f1_b: torch.Tensor, f2_w: torch.Tensor,
                  f2_b: torch.Tensor, mask: torch.Tensor | None = None,
                  mask_type: int | None = None) -> Any:
    """``nn.TransformerEncoderLayer``'s inference fast path (``batch_first``: ``src`` is
    batch, sequence, embedding) as attention, two linears and two layer norms."""
    if mask is not None or src.dim() != 3:
        return NotImplemented

    def attend(x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        d = e // num_heads
        qkv = F.linear(x, qkv_w, qkv_b).view(b, s, 3, num_heads, d).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(qkv[0], qkv[1].transpose(-2, -1)) * (float(d) ** -0.5)
        out = torch.matmul(torch.softmax(scores, -1), qkv[2])
        return F.linear(out.transpose(1, 2).reshape(b, s, e), proj_w, proj_b)

    def feed(x: torch.Tensor) -> torch.Tensor:
        h = F.linear(x, f1_w, f1_b)
        return F.linear(F.gelu(h) if use_gelu else F.relu(h), f2_w, f2_b)

    def norm(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (embed_dim,), w, bias, eps)

    if norm_first:
        x = src + attend(norm(src, n1_w, n1_b))
        return x + feed(norm(x, n2_w, n2_b))
    x = norm(src + attend(src), n1_w, n1_b)
    return norm(x + feed(x), n2_w, n2_b)


def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              dropout_p: float = 0.0, is_causal: bool = False, *,
              attn_mask: torch.Tensor | None = None, scale: float | None = None) -> Any:
    """``scaled_dot_product_attention``'s CPU kernel as its math: the output and the
    logsumexp of each row of scores. Core ATen's own decomposition of this operator gave an
    encoder layer's training step wrong gradients (torch 2.14: attention's input projection
    off by 105% relative L2, checked against eager); differentiating this one is exact."""
    if dropout_p:
        return NotImplemented
    factor = scale if scale is not None else query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(-2, -1)) * factor
    if is_causal:
        rows, cols = scores.shape[-2], scores.shape[-1]
        keep = torch.ones(rows, cols, dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        scores = (scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool
                  else scores + attn_mask)
    return torch.matmul(torch.softmax(scores, -1), value), torch.logsumexp(scores, -1)


def decompositions() -> dict[Any, Callable[..., Any]]:
    """Core ATen's decompositions and the backend's own."""
    table = dict(core_aten_decompositions())
    table[aten._transformer_encoder_layer_fwd.default] = encoder_layer
    table[aten._scaled_dot_product_flash_attention_for_cpu.default] = attention
    return table
