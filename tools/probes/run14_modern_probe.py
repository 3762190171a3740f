"""Runs 14 and 17's probe (docs/EXPERIMENTS.md): ModernBERT's changes on top of clozeformer's rotary encoder.

Not part of the package: the changes lost at equal steps and equal time, so the model has no
option for them. The script patches model.py's classes, then runs the CLI in the same process:

    PROBE=preln,geglu,nobias python tools/probes/run14_modern_probe.py pretrain ...   # pretrain's flags

- preln: LayerNorm before attention and FFN (residual stream un-normalised), one final LayerNorm
  after the last layer; the embedding LayerNorm stays (as in ModernBERT).
- geglu: FFN = W_out(gelu(W_g x) * (W_in x)) with intermediate 2/3 of BERT's (rounded to 8): the
  same parameters and FLOPs as the GELU FFN.
- nobias: no biases in the encoder's and the MLM head's linear layers and LayerNorms; the MLM
  decoder keeps its output bias (as in ModernBERT).
"""

import os
import sys

import torch.nn.functional as F
from torch import nn

from clozeformer.modeling import bert as M
from clozeformer.modeling.rotary import apply_rotary

PROBE = set(filter(None, os.environ.get("PROBE", "").split(",")))
assert PROBE <= {"preln", "geglu", "nobias"}, PROBE

_ffn_init, _enc_init = M.FeedForward.__init__, M.Encoder.__init__
_attn_forward = M.SelfAttention.forward


def ffn_init(self, cfg):
    _ffn_init(self, cfg)
    if "geglu" in PROBE:
        inner = 8 * round(cfg.intermediate_size * 2 / 3 / 8)
        self.intermediate = nn.Linear(cfg.hidden_size, 2 * inner)
        self.output = nn.Linear(inner, cfg.hidden_size)


def ffn_forward(self, x):
    inp = self.LayerNorm(x) if "preln" in PROBE else x
    if "geglu" in PROBE:
        a, g = self.intermediate(inp).chunk(2, dim=-1)
        h = F.gelu(g) * a
    else:
        h = self.act(self.intermediate(inp))
    out = x + self.dropout(self.output(h))
    return out if "preln" in PROBE else self.LayerNorm(out)


def attn_forward(self, x, mask, causal=False, rope=None):
    if "preln" not in PROBE:
        return _attn_forward(self, x, mask, causal, rope)
    B, T, H = x.shape
    NH = self.num_heads
    h = self.LayerNorm(x)  # pre-LN: normalise the input, keep the residual stream as is

    def heads(t):
        return t.view(B, T, NH, H // NH).transpose(1, 2)

    q, k, v = heads(self.query(h)), heads(self.key(h)), heads(self.value(h))
    if rope is not None:
        q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.attn_dropout if self.training else 0.0)
    return x + self.dropout(self.dense(ctx.transpose(1, 2).reshape(B, T, H)))


def enc_init(self, cfg):
    _enc_init(self, cfg)
    if "preln" in PROBE:
        self.final_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)


_enc_forward = M.Encoder.forward


def enc_forward(self, x, mask, causal=False):
    x = _enc_forward(self, x, mask, causal)
    return self.final_norm(x) if "preln" in PROBE else x


def without_biases(module: nn.Module) -> None:
    """Swap every Linear and LayerNorm directly under `module` for a bias-free one of the same shape."""
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear) and child.bias is not None:
            setattr(module, name, nn.Linear(child.in_features, child.out_features, bias=False))
        elif isinstance(child, nn.LayerNorm) and child.bias is not None:
            setattr(module, name, nn.LayerNorm(child.normalized_shape, eps=child.eps, bias=False))


def nobias_after(cls) -> None:
    init = cls.__init__

    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if "nobias" in PROBE:
            without_biases(self)

    cls.__init__ = patched


M.FeedForward.__init__, M.FeedForward.forward = ffn_init, ffn_forward
M.SelfAttention.forward = attn_forward
M.Encoder.__init__, M.Encoder.forward = enc_init, enc_forward
# after the FFN patch, so that GeGLU's layers lose their biases too
for cls in (M.Embeddings, M.SelfAttention, M.FeedForward, M.Encoder, M.MLMHead):
    nobias_after(cls)

if __name__ == "__main__":
    print("probe:", sorted(PROBE), file=sys.stderr)
    from clozeformer.commands.cli import main

    sys.exit(main())
