"""A BERT whose layers keep their own number of attention heads and their own FFN width.

headprune writes this file beside every slimmed checkpoint, and config.json's `auto_map` points at it, so
transformers 5 (which no longer replays `config.pruned_heads`) loads the folder with remote code:

    AutoModelForSequenceClassification.from_pretrained(DIR, trust_remote_code=True)

transformers 4 loads the same folder without remote code too (its BERT replays `pruned_heads`) unless FFN
neurons were removed: per-layer FFN widths (`config.intermediate_sizes`) need this file in both.

- Layer l keeps the heads that `config.pruned_heads[l]` does not name (`config.heads_per_layer[l]` of
  them), each of size hidden_size / num_attention_heads. A layer with 0 heads skips attention: its block adds only the output bias before the residual LayerNorm.
- Layer l's FFN has `config.intermediate_sizes[l]` neurons (all `intermediate_size` when the key is absent). A
  layer with 0 neurons skips the FFN: its block adds only the output bias before the residual LayerNorm.
- `output_attentions=True` returns one tensor per layer, [batch, kept heads, seq, seq]: the kept heads only,
  in their original order (`config.pruned_heads` names the removed ones). A 0-head layer gives [batch, 0, seq, seq].
- Eager attention only; the tensor names are those of Hugging Face's BERT.

Written by headprune (source: core/io/hf/modeling_headprune.py in the headprune repository); do not edit.
"""
import math

import torch
from torch import nn
from transformers import BertConfig, PreTrainedModel
from transformers.activations import ACT2FN
from transformers.modeling_outputs import BaseModelOutputWithPooling, SequenceClassifierOutput

try:  # transformers 5: init functions that leave weights loaded from the checkpoint alone
    from transformers import initialization as _init
except ImportError:  # transformers 4 initialises before loading
    _init = nn.init


def kept_heads(config):
    """Original indices of the heads each layer keeps: all heads minus config.pruned_heads, checked
    against config.heads_per_layer."""
    n, layers = config.num_attention_heads, config.num_hidden_layers
    pruned = getattr(config, "pruned_heads", None) or {}
    kept = [[h for h in range(n) if h not in set(pruned.get(l, pruned.get(str(l), ())))] for l in range(layers)]
    per_layer = getattr(config, "heads_per_layer", None)
    if per_layer is not None and [len(k) for k in kept] != [int(h) for h in per_layer]:
        raise ValueError(f"config.heads_per_layer {list(per_layer)} disagrees with config.pruned_heads "
                         f"(which leaves {[len(k) for k in kept]}); fix config.json")
    return kept


def ffn_widths(config):
    """The FFN width of each layer: config.intermediate_sizes, or intermediate_size everywhere."""
    widths = getattr(config, "intermediate_sizes", None)
    if widths is None:
        return [config.intermediate_size] * config.num_hidden_layers
    if len(widths) != config.num_hidden_layers or not all(0 <= int(w) <= config.intermediate_size for w in widths):
        raise ValueError(f"config.intermediate_sizes {list(widths)} needs one width in 0..{config.intermediate_size} "
                         f"per layer ({config.num_hidden_layers}); fix config.json")
    return [int(w) for w in widths]


class HeadpruneBertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids, position_ids):
        x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class HeadpruneBertSelfAttention(nn.Module):
    def __init__(self, config, kept):
        super().__init__()
        self.kept = list(kept)  # original head indices, in order
        self.heads = len(self.kept)
        self.head_dim = config.hidden_size // config.num_attention_heads
        width = self.heads * self.head_dim
        self.query = nn.Linear(config.hidden_size, width)
        self.key = nn.Linear(config.hidden_size, width)
        self.value = nn.Linear(config.hidden_size, width)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, x, additive_mask):
        b, t, _ = x.shape
        if self.heads == 0:  # nothing to attend with: an empty context and empty maps
            return x.new_zeros(b, t, 0), x.new_zeros(b, 0, t, t)

        def split(y):  # [b, t, heads*dim] -> [b, heads, t, dim]
            return y.view(b, t, self.heads, self.head_dim).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + additive_mask
        probs = scores.softmax(dim=-1)
        context = torch.matmul(self.dropout(probs), v)
        return context.transpose(1, 2).reshape(b, t, self.heads * self.head_dim), probs

    def prune(self, heads, output_dense):
        """Removes the given original heads that are still here (transformers 4's prune_heads)."""
        drop = set(heads) & set(self.kept)
        if not drop:
            return
        d = self.head_dim
        rows = [i * d + j for i, h in enumerate(self.kept) if h not in drop for j in range(d)]
        idx = torch.tensor(rows, dtype=torch.long, device=self.query.weight.device)
        with torch.no_grad():
            for linear in (self.query, self.key, self.value):
                linear.weight = nn.Parameter(linear.weight[idx].clone())
                linear.bias = nn.Parameter(linear.bias[idx].clone())
                linear.out_features = len(rows)
            output_dense.weight = nn.Parameter(output_dense.weight[:, idx].clone())
            output_dense.in_features = len(rows)
        self.kept = [h for h in self.kept if h not in drop]
        self.heads = len(self.kept)


class HeadpruneBertSelfOutput(nn.Module):
    def __init__(self, config, heads):
        super().__init__()
        self.dense = nn.Linear(heads * (config.hidden_size // config.num_attention_heads), config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, context, residual):  # a 0-wide context gives the bias alone
        return self.LayerNorm(self.dropout(self.dense(context)) + residual)


class HeadpruneBertAttention(nn.Module):
    def __init__(self, config, kept):
        super().__init__()
        self.self = HeadpruneBertSelfAttention(config, kept)
        self.output = HeadpruneBertSelfOutput(config, len(kept))

    def forward(self, x, additive_mask):
        context, probs = self.self(x, additive_mask)
        return self.output(context, x), probs


class HeadpruneBertIntermediate(nn.Module):
    def __init__(self, config, width):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, width)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, x):
        return self.intermediate_act_fn(self.dense(x))


class HeadpruneBertOutput(nn.Module):
    def __init__(self, config, width):
        super().__init__()
        self.dense = nn.Linear(width, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class HeadpruneBertLayer(nn.Module):
    def __init__(self, config, kept, width):
        super().__init__()
        self.attention = HeadpruneBertAttention(config, kept)
        self.intermediate = HeadpruneBertIntermediate(config, width)
        self.output = HeadpruneBertOutput(config, width)

    def forward(self, x, additive_mask):
        attended, probs = self.attention(x, additive_mask)
        return self.output(self.intermediate(attended), attended), probs


class HeadpruneBertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList(HeadpruneBertLayer(config, k, w)
                                   for k, w in zip(kept_heads(config), ffn_widths(config)))


class HeadpruneBertPooler(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden):
        return self.activation(self.dense(hidden[:, 0]))


class HeadpruneBertPreTrainedModel(PreTrainedModel):
    config_class = BertConfig
    base_model_prefix = "bert"

    def _init_weights(self, module):  # only weights missing from the checkpoint end up with these values
        std = getattr(self.config, "initializer_range", 0.02)
        if isinstance(module, (nn.Linear, nn.Embedding)):
            _init.normal_(module.weight, mean=0.0, std=std)
            if getattr(module, "bias", None) is not None:
                _init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            _init.ones_(module.weight)
            _init.zeros_(module.bias)


class HeadpruneBertModel(HeadpruneBertPreTrainedModel):
    def __init__(self, config, add_pooling_layer=True):
        super().__init__(config)
        self.embeddings = HeadpruneBertEmbeddings(config)
        self.encoder = HeadpruneBertEncoder(config)
        self.pooler = HeadpruneBertPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def _prune_heads(self, heads_to_prune):  # transformers 4 replays config.pruned_heads here (already gone)
        for layer, heads in heads_to_prune.items():
            attention = self.encoder.layer[int(layer)].attention
            attention.self.prune(heads, attention.output.dense)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        if input_ids is None:
            raise ValueError("HeadpruneBertModel needs input_ids")
        output_attentions = _flag(output_attentions, self.config, "output_attentions")
        output_hidden_states = _flag(output_hidden_states, self.config, "output_hidden_states")
        b, t = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if position_ids is None:
            position_ids = torch.arange(t, device=input_ids.device).unsqueeze(0).expand(b, t)
        x = self.embeddings(input_ids, token_type_ids, position_ids)
        additive_mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        hidden, attentions = (x,), ()
        for layer in self.encoder.layer:
            x, probs = layer(x, additive_mask)
            hidden += (x,)
            attentions += (probs,)
        pooled = self.pooler(x) if self.pooler is not None else None
        out = BaseModelOutputWithPooling(last_hidden_state=x, pooler_output=pooled,
                                         hidden_states=hidden if output_hidden_states else None,
                                         attentions=attentions if output_attentions else None)
        return out if _flag(return_dict, self.config, "return_dict", True) else out.to_tuple()


class HeadpruneBertForSequenceClassification(HeadpruneBertPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = HeadpruneBertModel(config)
        dropout = getattr(config, "classifier_dropout", None)
        self.dropout = nn.Dropout(config.hidden_dropout_prob if dropout is None else dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, labels=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        out = self.bert(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                        position_ids=position_ids, output_attentions=output_attentions,
                        output_hidden_states=output_hidden_states, return_dict=True)
        logits = self.classifier(self.dropout(out.pooler_output))
        loss = None
        if labels is not None:
            if self.num_labels == 1:
                loss = nn.functional.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
            elif getattr(self.config, "problem_type", None) == "multi_label_classification":
                loss = nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
            else:
                loss = nn.functional.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
        result = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                          attentions=out.attentions)
        return result if _flag(return_dict, self.config, "return_dict", True) else result.to_tuple()


def _flag(value, config, name, default=False):
    return value if value is not None else bool(getattr(config, name, default))
