"""ELECTRA's replaced-token detection (Clark et al. 2020) on BERT's encoder.

A small masked-LM generator fills the masked positions with samples; the discriminator (the
encoder you fine-tune) labels EVERY token original or replaced, so every position teaches it, not
only the 15% that are masked. Saved as the discriminator's HF directory (BertModel / RoFormerModel
+ `discriminator_predictions.*`) with the generator, an ordinary masked-LM directory, in `generator/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from clozeformer.modeling.bert import BertForMaskedLM, BertModel, PreTrainedModel, activation
from clozeformer.modeling.config import BertConfig


@dataclass
class ElectraOutput:
    loss: torch.Tensor | None  # mlm_loss + rtd_weight * rtd_loss
    logits: torch.Tensor  # the generator's (N, V) at labels != -100
    mlm_loss: torch.Tensor  # the generator's masked-LM loss
    rtd_loss: torch.Tensor  # the discriminator's mean binary cross-entropy over non-pad tokens
    rtd_logits: torch.Tensor  # (B, T): > 0 means "replaced"
    rtd_labels: torch.Tensor  # (B, T): 1 where the generator's sample differs from the original


def electra_generator_config(cfg: BertConfig, fraction: float = 0.25, layers: int | None = None) -> BertConfig:
    """The generator: `fraction` of the discriminator's width (ELECTRA: 1/4-1/2) and `layers`
    layers (default: the same depth). At full width the two share their embeddings."""
    hidden = max(16, round(cfg.hidden_size * fraction))
    heads = max(1, hidden // cfg.head_dim)
    while hidden % heads:
        heads -= 1
    return cfg.copy(
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers or cfg.num_hidden_layers,
    )


def sample_tokens(probs: torch.Tensor) -> torch.Tensor:
    """One token per row of `probs` (N, V), drawn by inverting each row's CDF: one uniform number
    per row and a binary search. The same distribution as `torch.multinomial(probs, 1)`, which on
    a CPU draws a random number per vocabulary entry: 25x slower for 600 rows of an 8k vocabulary,
    a third of an ELECTRA step (BENCHMARKS.md)."""
    cdf = probs.cumsum(-1)  # (N, V)
    u = torch.rand(probs.shape[0], 1, device=probs.device, dtype=cdf.dtype) * cdf[:, -1:]  # (N, 1)
    return torch.searchsorted(cdf, u, right=True).clamp_(max=probs.shape[-1] - 1).squeeze(-1)  # (N,)


class RTDHead(nn.Module):
    """dense -> act -> one logit per token (HF ElectraDiscriminatorPredictions)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.act = activation(cfg.hidden_act)
        self.dense_prediction = nn.Linear(cfg.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.act(self.dense(hidden))).squeeze(-1)  # (B, T, H) -> (B, T)


class ElectraDiscriminator(PreTrainedModel):
    """The encoder + replaced-token head; its directory loads as a plain backbone elsewhere."""

    hf_architecture = "BertModel"

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.rtd = RTDHead(config)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        return self.rtd(self.bert(input_ids, attention_mask, token_type_ids).last_hidden_state)  # (B, T)


class ElectraForPreTraining(nn.Module):
    """Generator (masked LM) + discriminator, trained jointly: loss = mlm + rtd_weight * rtd.

    A generator as wide as the discriminator shares its embedding module (word, token-type and
    position tables, LayerNorm) and so its tied MLM decoder: the generator's softmax then updates
    every token embedding the discriminator reads, which ELECTRA found to matter (Clark et al.,
    section 3.2). Saved, each directory holds its own copy; loading re-ties them.
    """

    def __init__(
        self,
        config: BertConfig,
        generator_config: BertConfig | None = None,
        rtd_weight: float = 50.0,
        *,
        discriminator: ElectraDiscriminator | None = None,
        generator: BertForMaskedLM | None = None,
    ):
        super().__init__()
        self.config = config
        self.rtd_weight = rtd_weight
        self.discriminator = discriminator or ElectraDiscriminator(config)
        self.generator = generator or BertForMaskedLM(generator_config or electra_generator_config(config))
        self.tie_weights()

    @property
    def bert(self) -> BertModel:
        """The encoder that is fine-tuned (a property, not a second registration of the module)."""
        return self.discriminator.bert

    @property
    def shares_embeddings(self) -> bool:
        return self.generator.config.hidden_size == self.config.hidden_size

    def tie_weights(self) -> None:
        if self.shares_embeddings:
            self.generator.bert.embeddings = self.discriminator.bert.embeddings
        self.generator.tie_weights()

    num_parameters = PreTrainedModel.num_parameters

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ElectraOutput:
        if labels is None:
            raise ValueError("ElectraForPreTraining needs MLM labels (the masked positions)")
        gen = self.generator(input_ids, attention_mask, token_type_ids, labels=labels)
        keep = labels != -100  # (B, T)
        with torch.no_grad():  # sample the replacements; no gradient flows back through sampling
            probs = F.softmax(gen.logits.detach().float(), dim=-1)  # (N, V)
            sampled = sample_tokens(probs) if probs.shape[0] else labels[keep]
            original = torch.where(keep, labels, input_ids)  # (B, T)
            corrupted = original.clone()
            corrupted[keep] = sampled
            rtd_labels = (corrupted != original).float()  # (B, T)
        rtd_logits = self.discriminator(corrupted, attention_mask, token_type_ids)  # (B, T)
        weight = torch.ones_like(rtd_labels) if attention_mask is None else attention_mask.float()
        per_token = F.binary_cross_entropy_with_logits(rtd_logits.float(), rtd_labels, reduction="none")
        rtd_loss = (per_token * weight).sum() / weight.sum().clamp(min=1.0)
        return ElectraOutput(gen.loss + self.rtd_weight * rtd_loss, gen.logits, gen.loss, rtd_loss, rtd_logits, rtd_labels)

    @classmethod
    def from_pretrained(
        cls, path, rtd_weight: float = 50.0, generator_fraction: float = 0.25, generator_layers: int | None = None, **overrides
    ):
        """The discriminator from `path`; the generator from `path/generator`, or fresh when absent
        (continued pretraining of a BERT directory with replaced-token detection)."""
        disc = ElectraDiscriminator.from_pretrained(path, **overrides)
        gen_dir = Path(path) / "generator"
        if gen_dir.is_dir():
            gen = BertForMaskedLM.from_pretrained(gen_dir, **overrides)
        else:
            gen = BertForMaskedLM(electra_generator_config(disc.config, generator_fraction, generator_layers))
        return cls(disc.config, rtd_weight=rtd_weight, discriminator=disc, generator=gen)

    def save_pretrained(self, directory) -> None:
        """The discriminator's directory, with the generator's in `generator/`."""
        self.discriminator.save_pretrained(directory)
        self.generator.save_pretrained(Path(directory) / "generator")
