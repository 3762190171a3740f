"""The BERT encoder and its heads, top to bottom.

    embeddings -> [self-attention -> FFN] x L (post-LN residual blocks) -> pooler -> heads

Positions come in one of two ways (`BertConfig.position_embedding_type`):
- "absolute" (BERT): a learned table added to the word embeddings. HF BERT checkpoints.
- "rotary" (RoFormer, Su et al. 2021): no table; queries and keys are rotated by their
  position inside attention, so q.k depends on the relative offset and "look at the next token"
  is expressible from the first step. Same layers otherwise; saved as an HF RoFormer directory.

Dimension legend: B batch, T sequence length, H hidden size, NH attention heads, D = H / NH head size,
I intermediate (FFN) size, V vocabulary size, N masked positions, C choices (multiple choice), K labels.
A label of -100 is ignored (F.cross_entropy's default ignore_index).

The module tree is our own, kept short; `modeling/hf_format.py` holds the one explicit map from
our parameter names to the names of Hugging Face / Google BERT checkpoints; rotary positions are
`modeling/rotary.py`, ELECTRA's generator and discriminator `modeling/electra.py`. The model
knows nothing of DDP, AMP or torch.compile: the trainers apply those.

Efficiency trick, isolated and switchable: with MLM labels, vocabulary logits are computed only
at the masked positions (`sparse_mlm`, as the original TF BERT did with `masked_lm_positions`).
HF computes all B x T x V logits; at 15% masking the decoder (the largest matmul of a small BERT)
does ~7x less work. `tests/test_model.py` proves sparse and dense give the same loss and grads.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from clozeformer.modeling import hf_format as hf
from clozeformer.modeling.config import POOLINGS, BertConfig
from clozeformer.modeling.rotary import Rope, apply_rotary, rotary_tables

# ----------------------------------------------------------------------------- outputs
# Small named outputs with HF field names; never flag-dependent tuples.
#
# The masked-LM contract, one for every model with an MLM head (MaskedLMOutput, PreTrainingOutput,
# electra.ElectraOutput): `logits` holds the vocabulary logits, (N, V) rows at the positions whose
# label is not -100 when the model is sparse (`sparse_mlm`, the default) and labels are given, else
# dense (B, T, V). The trainers read `out.logits` whatever the objective; PreTrainingOutput also
# answers to transformers' name for it, `prediction_logits`.


@dataclass
class BaseModelOutput:
    last_hidden_state: torch.Tensor  # (B, T, H)
    pooler_output: torch.Tensor | None = None  # (B, H), tanh(dense([CLS]))


@dataclass
class PreTrainingOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor  # the MLM contract above: (N, V) sparse, (B, T, V) dense
    seq_relationship_logits: torch.Tensor  # (B, 2)
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None
    last_hidden_state: torch.Tensor | None = None

    @property
    def prediction_logits(self) -> torch.Tensor:
        """transformers' name for `logits`."""
        return self.logits


@dataclass
class MaskedLMOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor  # the MLM contract above: (N, V) sparse, (B, T, V) dense
    last_hidden_state: torch.Tensor | None = None


@dataclass
class SequenceClassifierOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor  # (B, K); (B, C) for multiple choice; (B, T, K) for token classification
    last_hidden_state: torch.Tensor | None = None
    pooler_output: torch.Tensor | None = None


@dataclass
class QuestionAnsweringOutput:
    loss: torch.Tensor | None
    start_logits: torch.Tensor  # (B, T)
    end_logits: torch.Tensor  # (B, T)
    last_hidden_state: torch.Tensor | None = None


# ----------------------------------------------------------------------------- building blocks


def activation(name: str):
    """The FFN non-linearity by its HF `hidden_act` name. "gelu" is the exact erf GELU of BERT."""
    tanh = functools.partial(F.gelu, approximate="tanh")  # the tanh approximation (GPT-2)
    fns = dict(gelu=F.gelu, gelu_new=tanh, gelu_pytorch_tanh=tanh, gelu_fast=tanh, relu=F.relu, silu=F.silu, swish=F.silu)
    if name not in fns:
        raise ValueError(f"unknown activation {name!r}")  # BertConfig.validate() rejects it earlier
    return fns[name]


def head_dropout(cfg: BertConfig) -> float:
    """Dropout before a task head: classifier_dropout when set, else hidden_dropout_prob (HF's rule)."""
    return cfg.classifier_dropout if cfg.classifier_dropout is not None else cfg.hidden_dropout_prob


class Embeddings(nn.Module):
    """word + position (absolute only) + token type, then LayerNorm and dropout."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.max_positions = cfg.max_position_embeddings
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size, padding_idx=cfg.pad_token_id)
        # rotary models carry no position table: positions enter in attention (rotary_tables)
        self.position_embeddings = None if cfg.rotary else nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        T = input_ids.shape[1]
        if T > self.max_positions:
            raise ValueError(f"sequence length {T} exceeds max_position_embeddings {self.max_positions}")
        x = self.word_embeddings(input_ids)  # (B, T, H)
        if self.position_embeddings is not None:
            x = x + self.position_embeddings.weight[:T]  # (T, H) broadcast over B
        tte = self.token_type_embeddings
        x = x + (tte.weight[0] if token_type_ids is None else tte(token_type_ids))
        return self.dropout(self.LayerNorm(x))


class SelfAttention(nn.Module):
    """Multi-head self-attention through SDPA, then output projection + residual + LayerNorm."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        H = cfg.hidden_size
        self.num_heads = cfg.num_attention_heads
        self.query = nn.Linear(H, H)
        self.key = nn.Linear(H, H)
        self.value = nn.Linear(H, H)
        self.dense = nn.Linear(H, H)
        self.LayerNorm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
        self.attn_dropout = cfg.attention_probs_dropout_prob
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, causal: bool = False, rope: Rope | None = None) -> torch.Tensor:
        B, T, H = x.shape
        NH = self.num_heads

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(B, T, NH, H // NH).transpose(1, 2)  # (B, T, H) -> (B, NH, T, D)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        if rope is not None:  # rotary positions: queries and keys only (RoFormer, rotary_value=False)
            q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        # mask: (B, 1, 1, T) bool, True = attend; None = no padding anywhere (fast path).
        # causal (left-to-right, only for the MLM-vs-CLM experiment): token t sees tokens <= t.
        if causal and mask is not None:
            mask = mask & torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (B, 1, T, T)
        ctx = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.attn_dropout if self.training else 0.0, is_causal=causal and mask is None
        )
        ctx = ctx.transpose(1, 2).reshape(B, T, H)  # (B, NH, T, D) -> (B, T, H)
        return self.LayerNorm(x + self.dropout(self.dense(ctx)))


class FeedForward(nn.Module):
    """H -> I -> H with the configured activation, then residual + LayerNorm (post-LN)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.intermediate = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.output = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.act = activation(cfg.hidden_act)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.intermediate(x))  # (B, T, I)
        return self.LayerNorm(x + self.dropout(self.output(h)))  # (B, T, H)


class Layer(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attention = SelfAttention(cfg)
        self.ffn = FeedForward(cfg)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, causal: bool = False, rope: Rope | None = None) -> torch.Tensor:
        return self.ffn(self.attention(x, mask, causal, rope))


class Encoder(nn.Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_hidden_layers))
        self.rotary = cfg.rotary
        self.head_dim = cfg.head_dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, causal: bool = False) -> torch.Tensor:
        rope = rotary_tables(x.shape[1], self.head_dim, x.device) if self.rotary else None  # (T, D/2) x 2
        for layer in self.layer:
            x = layer(x, mask, causal, rope)
        return x


def attention_mask_for_sdpa(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(B, T) 1/0 padding mask -> (B, 1, 1, T) bool for SDPA, or None when nothing is padded.

    Returning None when every token is real lets SDPA pick its fastest kernel. That check reads
    the tensor's values, which would break a `torch.compile` graph, so compiled code keeps the mask.
    """
    if attention_mask is None or (not torch.compiler.is_compiling() and bool(attention_mask.all())):
        return None
    return attention_mask.bool()[:, None, None, :]


# ----------------------------------------------------------------------------- init


def init_weights(module: nn.Module, cfg: BertConfig) -> None:
    """BERT's initialisation (Devlin et al. 2019; google-research/bert `modeling.py`):

    | parameter                   | init                                  |
    |-----------------------------|---------------------------------------|
    | Linear / Embedding weights  | normal(0, cfg.initializer_range=0.02) |
    | Linear biases, MLM bias     | 0                                     |
    | LayerNorm weight / bias     | 1 / 0                                 |
    | padding row of embeddings   | 0                                     |
    """
    std = cfg.initializer_range
    modules = list(module.modules())
    for m in modules:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=std)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
        if isinstance(m, (nn.Linear, nn.LayerNorm, MLMHead)) and m.bias is not None:
            nn.init.zeros_(m.bias)
    # Embeddings last: the MLM decoder shares the word-embedding matrix, and the padding row
    # must end up zero whichever module touched the shared tensor first.
    for m in modules:
        if isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=std)
            if m.padding_idx is not None:
                nn.init.zeros_(m.weight[m.padding_idx])


class PreTrainedModel(nn.Module):
    """Shared by all classes: config, init, HF-format load/save (implemented in hf.py)."""

    #: name HF uses for this class in config.json "architectures"
    hf_architecture: str = "BertModel"

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config

    def post_init(self) -> None:
        init_weights(self, self.config)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Point the MLM decoder at the word embeddings (init may have replaced either)."""
        mlm = getattr(self, "mlm", None)
        if mlm is not None:
            mlm.decoder.weight = self.bert.embeddings.word_embeddings.weight

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Load an HF-format BERT directory (config.json + model.safetensors / pytorch_model.bin)."""
        return hf.load_pretrained(cls, path, **kwargs)

    def save_pretrained(self, directory) -> None:
        """Write config.json + model.safetensors that transformers' AutoModel* loads."""
        hf.save_pretrained(self, directory)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


# ----------------------------------------------------------------------------- the encoder


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor | None, mode: str) -> torch.Tensor:
    """(B, T, H) token states -> (B, H): the [CLS] row ("cls"), the mean or the max over the real
    (unpadded) tokens ("mean", "max"), or the last real token ("last": in a left-to-right model the
    only one that has seen the whole input). One definition for the classification heads, the
    sentence-embedding models and the `embed` pipeline."""
    if mode == "cls":
        return hidden[:, 0]
    if attention_mask is None:
        attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)
    if mode == "last":
        last = attention_mask.long().sum(dim=1).clamp(min=1) - 1  # (B,) the last real position
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    if mode == "max":
        return hidden.masked_fill(mask == 0, torch.finfo(hidden.dtype).min).amax(dim=1)
    if mode == "mean":
        return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    raise ValueError(f"pooling {mode!r}: choose one of {', '.join(POOLINGS)}")


class Pooler(nn.Module):
    """The sentence representation used by NSP and classification.

    It reads h_[CLS] (`classifier_pooling="cls"`, BERT's and transformers' rule), or another `pool`
    mode ("mean" as ModernBERT offers, "max", "last" for a left-to-right model); transformers' BERT
    and RoFormer heads read [CLS].
    BERT: tanh(dense(h)). Rotary models follow RoFormer's classification head: act(dense(dropout(h)))
    with the FFN's activation (hf.py saves this dense as `classifier.dense`).
    """

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.act = activation(cfg.hidden_act) if cfg.rotary else torch.tanh
        self.dropout = nn.Dropout(head_dropout(cfg)) if cfg.rotary else nn.Identity()
        self.pooling = cfg.classifier_pooling

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = pool(hidden, attention_mask, self.pooling)  # (B, T, H) -> (B, H)
        return self.act(self.dense(self.dropout(h)))


class BertModel(PreTrainedModel):
    hf_architecture = "BertModel"

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config)
        self.pooler = Pooler(config) if add_pooling_layer else None
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        causal: bool = False,
    ) -> BaseModelOutput:
        """Left-to-right when `config.is_decoder` (a causal LM and its fine-tuned models) or
        `causal=True`; BERT is bidirectional."""
        x = self.embeddings(input_ids, token_type_ids)  # (B, T) -> (B, T, H)
        x = self.encoder(x, attention_mask_for_sdpa(attention_mask), causal or self.config.is_decoder)
        return BaseModelOutput(x, self.pooler(x, attention_mask) if self.pooler is not None else None)


# ----------------------------------------------------------------------------- heads


class MLMHead(nn.Module):
    """dense -> act -> LayerNorm -> decoder tied to the word embeddings (+ its own bias)."""

    def __init__(self, cfg: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.act = activation(cfg.hidden_act)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.decoder = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight  # tied: one Parameter, two names
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.LayerNorm(self.act(self.dense(hidden)))  # (..., H)
        return F.linear(h, self.decoder.weight, self.bias)  # (..., V)


def mlm_loss_and_logits(
    head: MLMHead, hidden: torch.Tensor, labels: torch.Tensor | None, sparse: bool = True
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """MLM loss and logits; with `sparse` and labels, logits only at labels != -100.

    Sparse: gather the N masked rows of (B, T, H) first -> (N, H) -> (N, V). Same loss and
    gradients as the dense path (mean cross-entropy over non-ignored tokens).
    """
    if labels is not None and sparse:
        flat_labels = labels.reshape(-1)
        keep = flat_labels != -100  # (B*T,)
        logits = head(hidden.reshape(-1, hidden.shape[-1])[keep])  # (N, H) -> (N, V)
        return F.cross_entropy(logits.float(), flat_labels[keep]), logits
    logits = head(hidden)  # (B, T, V)
    loss = None if labels is None else F.cross_entropy(logits.float().flatten(0, -2), labels.reshape(-1))
    return loss, logits


class BertForPreTraining(PreTrainedModel):
    """MLM + NSP, as in the paper. loss = mlm_loss + nsp_loss (NSP only if labels are given)."""

    hf_architecture = "BertForPreTraining"

    def __init__(self, config: BertConfig, sparse_mlm: bool = True):
        super().__init__(config)
        self.bert = BertModel(config)
        self.mlm = MLMHead(config, self.bert.embeddings.word_embeddings)
        self.nsp = nn.Linear(config.hidden_size, 2)
        self.sparse_mlm = sparse_mlm
        self.post_init()

    def forward(
        self, input_ids, attention_mask=None, token_type_ids=None, labels=None, next_sentence_label=None
    ) -> PreTrainingOutput:
        out = self.bert(input_ids, attention_mask, token_type_ids)
        mlm_loss, logits = mlm_loss_and_logits(self.mlm, out.last_hidden_state, labels, self.sparse_mlm)
        nsp_logits = self.nsp(out.pooler_output)  # (B, 2)
        nsp_loss = None if next_sentence_label is None else F.cross_entropy(nsp_logits.float(), next_sentence_label.view(-1))
        losses = [x for x in (mlm_loss, nsp_loss) if x is not None]
        loss = sum(losses) if losses else None
        return PreTrainingOutput(loss, logits, nsp_logits, mlm_loss, nsp_loss, out.last_hidden_state)


class BertForMaskedLM(PreTrainedModel):
    hf_architecture = "BertForMaskedLM"

    def __init__(self, config: BertConfig, sparse_mlm: bool = True):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.mlm = MLMHead(config, self.bert.embeddings.word_embeddings)
        self.sparse_mlm = sparse_mlm
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> MaskedLMOutput:
        out = self.bert(input_ids, attention_mask, token_type_ids)
        loss, logits = mlm_loss_and_logits(self.mlm, out.last_hidden_state, labels, self.sparse_mlm)
        return MaskedLMOutput(loss, logits, out.last_hidden_state)


class BertLMHeadModel(BertForMaskedLM):
    """A left-to-right LM on BERT's layers (`pretrain --objective clm`): the baseline of the
    paper's bidirectional-vs-left-to-right claim, with the same head and sparse loss as MLM;
    it is BertForMaskedLM with a causal config (`is_decoder`).

    `labels[:, t]` is the token to predict at position t, i.e. the NEXT token
    (`data.masking.next_token_labels`), -100 where there is none; the loss is the MLM head's
    cross-entropy there. transformers' BertLMHeadModel takes unshifted labels and shifts
    inside; the logits of the two are the same (tests/test_clm.py).
    """

    hf_architecture = "BertLMHeadModel"

    def __init__(self, config: BertConfig, sparse_mlm: bool = True):
        super().__init__(config if config.is_decoder else config.copy(is_decoder=True), sparse_mlm)


def classification_loss(cfg: BertConfig, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """HF's rule: 1 label -> regression (MSE); integer labels -> cross-entropy; else multi-label BCE."""
    problem = cfg.problem_type
    if problem is None:
        if cfg.num_labels == 1:
            problem = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem = "single_label_classification"
        else:
            problem = "multi_label_classification"
    if problem == "regression":
        if cfg.num_labels == 1:
            return F.mse_loss(logits.squeeze(-1).float(), labels.float().view(-1))
        return F.mse_loss(logits.float(), labels.float())
    if problem == "single_label_classification":
        return F.cross_entropy(logits.float().view(-1, cfg.num_labels), labels.view(-1))
    return F.binary_cross_entropy_with_logits(logits.float(), labels.float())


class BertForSequenceClassification(PreTrainedModel):
    """Dropout + linear on the pooled [CLS]; regression when num_labels == 1."""

    hf_architecture = "BertForSequenceClassification"

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config)
        self.dropout = nn.Dropout(head_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> SequenceClassifierOutput:
        out = self.bert(input_ids, attention_mask, token_type_ids)
        logits = self.classifier(self.dropout(out.pooler_output))  # (B, K)
        loss = classification_loss(self.config, logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss, logits, out.last_hidden_state, out.pooler_output)


class BertForTokenClassification(PreTrainedModel):
    hf_architecture = "BertForTokenClassification"

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.dropout = nn.Dropout(head_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> SequenceClassifierOutput:
        out = self.bert(input_ids, attention_mask, token_type_ids)
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (B, T, K)
        loss = None if labels is None else F.cross_entropy(logits.float().view(-1, self.config.num_labels), labels.view(-1))
        return SequenceClassifierOutput(loss, logits, out.last_hidden_state)


class BertForQuestionAnswering(PreTrainedModel):
    """Span QA: a linear layer gives start and end logits per token."""

    hf_architecture = "BertForQuestionAnswering"

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(
        self, input_ids, attention_mask=None, token_type_ids=None, start_positions=None, end_positions=None
    ) -> QuestionAnsweringOutput:
        out = self.bert(input_ids, attention_mask, token_type_ids)
        logits = self.qa_outputs(out.last_hidden_state)  # (B, T, 2)
        start_logits, end_logits = (t.squeeze(-1).contiguous() for t in logits.split(1, dim=-1))  # (B, T) each
        loss = None
        if start_positions is not None and end_positions is not None:
            T = start_logits.shape[1]  # positions outside the window are clamped to T and ignored (HF convention)
            s, e = (p.view(-1).clamp(0, T) for p in (start_positions, end_positions))
            loss = (
                F.cross_entropy(start_logits.float(), s, ignore_index=T) + F.cross_entropy(end_logits.float(), e, ignore_index=T)
            ) / 2
        return QuestionAnsweringOutput(loss, start_logits, end_logits, out.last_hidden_state)


class BertForMultipleChoice(PreTrainedModel):
    """Each (context, choice) pair is encoded; a linear layer scores its pooled [CLS]."""

    hf_architecture = "BertForMultipleChoice"

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(config)
        self.dropout = nn.Dropout(head_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> SequenceClassifierOutput:
        B, C, T = input_ids.shape
        flat = (None if t is None else t.reshape(B * C, T) for t in (input_ids, attention_mask, token_type_ids))  # (B*C, T)
        out = self.bert(*flat)
        logits = self.classifier(self.dropout(out.pooler_output)).view(B, C)  # (B*C, 1) -> (B, C)
        loss = F.cross_entropy(logits.float(), labels.view(-1)) if labels is not None else None
        return SequenceClassifierOutput(loss, logits, None, None)


#: HF architecture name -> our class (used by hf.py when a directory names its architecture)
MODEL_CLASSES: dict[str, type[PreTrainedModel]] = {
    c.hf_architecture: c
    for c in (
        BertModel,
        BertForPreTraining,
        BertForMaskedLM,
        BertLMHeadModel,
        BertForSequenceClassification,
        BertForTokenClassification,
        BertForQuestionAnswering,
        BertForMultipleChoice,
    )
}


def mlm_flops_per_token(cfg: BertConfig, seq_len: int, masked_fraction: float | None = None) -> float:
    """Approximate training FLOPs per token (forward + backward = 3x forward matmul FLOPs).

    Counts the encoder matmuls, attention scores, and the MLM decoder (only at masked tokens
    when `masked_fraction` is given, as with the sparse head). Used for MFU reporting.
    """
    H, I, L, V = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    per_layer = 2 * (4 * H * H + 2 * H * I) + 2 * 2 * seq_len * H  # projections + FFN + QK^T and AV
    head = 2 * (H * H) + 2 * H * V * (masked_fraction if masked_fraction is not None else 1.0)
    return 3.0 * (L * per_layer + head)


__all__ = [
    "BertConfig",
    "BertModel",
    "BertForPreTraining",
    "BertForMaskedLM",
    "BertLMHeadModel",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertForQuestionAnswering",
    "BertForMultipleChoice",
    "init_weights",
    "MODEL_CLASSES",
]
