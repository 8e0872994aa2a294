"""BERT-family encoders (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA) whose layers keep their own number of
attention heads and their own FFN width.

headprune writes this file beside every slimmed checkpoint, and config.json's `auto_map` points at it, so
transformers 5 (which no longer replays `config.pruned_heads`) loads the folder with remote code:

    AutoModelForSequenceClassification.from_pretrained(DIR, trust_remote_code=True)
    AutoModelForTokenClassification.from_pretrained(DIR, trust_remote_code=True)   # a tagger's folder

transformers 4 loads the same folder without remote code too (its models replay `pruned_heads`) unless FFN
neurons were removed: per-layer FFN widths (`config.intermediate_sizes`) need this file in both.

- `config.headprune_layout` (written by headprune from its architecture table, core/model/arch.h) names every
  tensor as the architecture's own model names it ("roberta.encoder.layer.{}.attention.self.query.weight",
  "distilbert.transformer.layer.{}.ffn.lin1.weight", …) and says how the architecture differs from BERT: where
  positions start, token types or none, the classification head's activation and dropout, and the sizes in
  BERT's names. The modules below are built at exactly those names, so the checkpoint loads as saved.
- Layer l keeps the heads that `config.pruned_heads[l]` does not name (`config.heads_per_layer[l]` of
  them), each of size `head_dim` (hidden_size / num_attention_heads unless hidden channels were removed).
- A model whose hidden channels were removed has hidden_size = the channels kept: every tensor with a hidden
  axis is that narrow, and the classification head maps them to its own width, `classifier_hidden_size` (the
  original hidden size). The plain transformers classes cannot build such a model; this file can. A layer with 0 heads skips attention: its block adds
  only the output bias before the residual LayerNorm.
- Layer l's FFN has `config.intermediate_sizes[l]` neurons (all `intermediate_size` when the key is absent). A
  layer with 0 neurons skips the FFN: its block adds only the output bias before the residual LayerNorm.
- `output_attentions=True` returns one tensor per layer, [batch, kept heads, seq, seq]: the kept heads only,
  in their original order (`config.pruned_heads` names the removed ones). A 0-head layer gives [batch, 0, seq, seq].
- Eager attention only.

Written by headprune (source: core/io/hf/modeling_headprune.py in the headprune repository); do not edit.
"""
import math

import torch
from torch import nn
from transformers import BertConfig, DistilBertConfig, ElectraConfig, PreTrainedModel, RobertaConfig, XLMRobertaConfig
from transformers.activations import ACT2FN
from transformers.modeling_outputs import BaseModelOutputWithPooling, SequenceClassifierOutput, TokenClassifierOutput

try:  # transformers 5: init functions that leave weights loaded from the checkpoint alone
    from transformers import initialization as _init
except ImportError:  # transformers 4 initialises before loading
    _init = nn.init


def layout(config):
    """config.headprune_layout, checked: the tensor names and the architecture's differences from BERT."""
    lay = getattr(config, "headprune_layout", None)
    if not isinstance(lay, dict) or "tensors" not in lay or "sizes" not in lay:
        raise ValueError("config.json has no headprune_layout; re-export the model with headprune")
    return lay


def kept_heads(config):
    """Original indices of the heads each layer keeps: all heads minus config.pruned_heads, checked
    against config.heads_per_layer."""
    size = layout(config)["sizes"]
    n, layers = size["num_attention_heads"], size["num_hidden_layers"]
    pruned = getattr(config, "pruned_heads", None) or {}
    kept = [[h for h in range(n) if h not in set(pruned.get(l, pruned.get(str(l), ())))] for l in range(layers)]
    per_layer = getattr(config, "heads_per_layer", None)
    if per_layer is not None and [len(k) for k in kept] != [int(h) for h in per_layer]:
        raise ValueError(f"config.heads_per_layer {list(per_layer)} disagrees with config.pruned_heads "
                         f"(which leaves {[len(k) for k in kept]}); fix config.json")
    return kept


def ffn_widths(config):
    """The FFN width of each layer: config.intermediate_sizes, or intermediate_size everywhere."""
    size = layout(config)["sizes"]
    widths = getattr(config, "intermediate_sizes", None)
    if widths is None:
        return [size["intermediate_size"]] * size["num_hidden_layers"]
    if len(widths) != size["num_hidden_layers"] or not all(0 <= int(w) <= size["intermediate_size"] for w in widths):
        raise ValueError(f"config.intermediate_sizes {list(widths)} needs one width in 0..{size['intermediate_size']} "
                         f"per layer ({size['num_hidden_layers']}); fix config.json")
    return [int(w) for w in widths]


def head_dim(config):
    """The size of one attention head: sizes.head_dim, else hidden_size / num_attention_heads."""
    size = layout(config)["sizes"]
    return int(size.get("head_dim") or size["hidden_size"] // size["num_attention_heads"])


def _place(root, path, module):
    """Puts `module` at the dotted `path` under `root`, making plain containers on the way."""
    *parents, last = path.split(".")
    node = root
    for part in parents:
        if not hasattr(node, part):
            node.add_module(part, nn.Module())
        node = getattr(node, part)
    if not hasattr(node, last):
        node.add_module(last, module)
    return getattr(node, last)


def build_modules(root, config, prefix, inside):
    """The modules of the layout's tensors under `prefix` (with it removed) when `inside`, else of the others
    (the classification head's), at their own names. Returns {unit: [module of layer 0, ...]} (one entry for
    the per-model units), e.g. "attn.q", "emb.ln"."""
    lay, kept, widths = layout(config), kept_heads(config), ffn_widths(config)
    size = lay["sizes"]
    d, e, dh = size["hidden_size"], size["embedding_size"], head_dim(config)
    c = size.get("classifier_hidden_size", d)
    eps = size["layer_norm_eps"]

    def make(unit, l):
        heads = len(kept[l]) * dh if l is not None else 0
        width = widths[l] if l is not None else 0
        return {
            "emb.word": lambda: nn.Embedding(size["vocab_size"], e, padding_idx=size["pad_token_id"]),
            "emb.pos": lambda: nn.Embedding(size["max_position_embeddings"], e),
            "emb.type": lambda: nn.Embedding(size["type_vocab_size"], e),
            "emb.ln": lambda: nn.LayerNorm(e, eps=eps),
            "emb.proj": lambda: nn.Linear(e, d),
            "attn.q": lambda: nn.Linear(d, heads), "attn.k": lambda: nn.Linear(d, heads),
            "attn.v": lambda: nn.Linear(d, heads), "attn.o": lambda: nn.Linear(heads, d),
            "attn.ln": lambda: nn.LayerNorm(d, eps=eps),
            "ffn.in": lambda: nn.Linear(d, width), "ffn.out": lambda: nn.Linear(width, d),
            "ffn.ln": lambda: nn.LayerNorm(d, eps=eps),
            "pool": lambda: nn.Linear(d, c), "cls": lambda: nn.Linear(c, size["num_labels"]),
        }[unit]()

    units = {}
    for short, name in lay["tensors"].items():
        unit = short[:-2] if short.endswith((".w", ".b")) else short  # "attn.q.w" -> "attn.q"; "emb.word"
        if unit in units or name.startswith(prefix) != inside:
            continue
        module_path = name[len(prefix) if inside else 0:].rsplit(".", 1)[0]
        layers = range(size["num_hidden_layers"]) if "{}" in module_path else [None]
        units[unit] = [_place(root, module_path.replace("{}", str(l)), make(unit, l)) for l in layers]
    return units


class HeadprunePreTrainedModel(PreTrainedModel):
    def _init_weights(self, module):  # only weights missing from the checkpoint end up with these values
        std = getattr(self.config, "initializer_range", 0.02)
        if isinstance(module, (nn.Linear, nn.Embedding)):
            _init.normal_(module.weight, mean=0.0, std=std)
            if getattr(module, "bias", None) is not None:
                _init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            _init.ones_(module.weight)
            _init.zeros_(module.bias)


class HeadpruneEncoder:
    """The forward of an encoder whose modules `build_modules` made (a mixin of the model classes below)."""

    def _encode(self, units, input_ids, attention_mask, token_type_ids, position_ids, output_attentions):
        lay = layout(self.config)
        size = lay["sizes"]
        b, t = input_ids.shape
        pad = size["pad_token_id"]
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if position_ids is None:
            if lay["positions_after_padding"]:  # RoBERTa: pad + 1, pad + 2, … over real tokens, pad at padding
                real = input_ids.ne(pad).long()
                position_ids = torch.cumsum(real, dim=1) * real + pad
            else:
                position_ids = torch.arange(t, device=input_ids.device).unsqueeze(0).expand(b, t)
        x = units["emb.word"][0](input_ids) + units["emb.pos"][0](position_ids)
        if "emb.type" in units:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + units["emb.type"][0](token_type_ids)
        drop = nn.functional.dropout
        x = drop(units["emb.ln"][0](x), size["hidden_dropout_prob"], self.training)
        if "emb.proj" in units:
            x = units["emb.proj"][0](x)
        additive = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        hidden, attentions = (x,), ()
        dh = head_dim(self.config)
        for l in range(size["num_hidden_layers"]):
            heads = units["attn.q"][l].out_features // dh
            if heads == 0:
                context, probs = x.new_zeros(b, t, 0), x.new_zeros(b, 0, t, t)
            else:
                def split(y):  # [b, t, heads*dh] -> [b, heads, t, dh]
                    return y.view(b, t, heads, dh).transpose(1, 2)

                q, k, v = (split(units[n][l](x)) for n in ("attn.q", "attn.k", "attn.v"))
                probs = (torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dh) + additive).softmax(dim=-1)
                context = torch.matmul(drop(probs, size["attention_probs_dropout_prob"], self.training), v)
                context = context.transpose(1, 2).reshape(b, t, heads * dh)
            # An emptied sublayer adds its output bias alone: no product with a zero-size weight (ONNX Runtime's
            # quantize_dynamic fails on one).
            attn = units["attn.o"][l](context) if heads else units["attn.o"][l].bias.expand(b, t, -1)
            if lay["attention_output_dropout"]:  # DistilBERT drops nothing here
                attn = drop(attn, size["hidden_dropout_prob"], self.training)
            x = units["attn.ln"][l](attn + x)
            if units["ffn.in"][l].out_features:
                inner = ACT2FN[size["hidden_act"]](units["ffn.in"][l](x))
                ffn = drop(units["ffn.out"][l](inner), size["hidden_dropout_prob"], self.training)
            else:
                ffn = drop(units["ffn.out"][l].bias.expand(b, t, -1), size["hidden_dropout_prob"], self.training)
            x = units["ffn.ln"][l](ffn + x)
            hidden += (x,)
            attentions += (probs,)
        return x, hidden, attentions

    def _head(self, units, x):
        """The classification head on the first token: act(dense(x0)), dropout, the output layer; a tagger's
        (layout token_head) on every token: dropout, the output layer."""
        lay = layout(self.config)
        rate = lay["sizes"]["classifier_dropout"]
        if lay.get("token_head"):
            return units["cls"][0](nn.functional.dropout(x, rate, self.training))
        x0 = x[:, 0]
        if lay["dropout_before_head"]:
            x0 = nn.functional.dropout(x0, rate, self.training)
        pooled = ACT2FN[lay["head_act"]](units["pool"][0](x0))
        return units["cls"][0](nn.functional.dropout(pooled, rate, self.training))


def _prune(units, kept, dh, heads_to_prune):
    """Removes the given original heads that are still present (transformers 4 replays config.pruned_heads on
    load, when they are already gone); `kept` holds each layer's present heads and is updated."""
    for layer, heads in heads_to_prune.items():
        l = int(layer)
        drop = set(heads) & set(kept[l])
        if not drop:
            continue
        idx = torch.tensor([i * dh + j for i, h in enumerate(kept[l]) if h not in drop for j in range(dh)],
                           dtype=torch.long)
        with torch.no_grad():
            for n in ("attn.q", "attn.k", "attn.v"):
                lin = units[n][l]
                lin.weight, lin.bias = nn.Parameter(lin.weight[idx].clone()), nn.Parameter(lin.bias[idx].clone())
                lin.out_features = len(idx)
            o = units["attn.o"][l]
            o.weight, o.in_features = nn.Parameter(o.weight[:, idx].clone()), len(idx)
        kept[l] = [h for h in kept[l] if h not in drop]


def _make_classes(arch, config_class, prefix):
    """The base model, the sequence classifier and the tagger of one architecture (config_class must match the
    config's)."""

    class Base(HeadprunePreTrainedModel, HeadpruneEncoder):
        base_model_prefix = prefix

        def __init__(self, config, add_pooling_layer=True):
            super().__init__(config)
            self.units = build_modules(self, config, prefix + ".", inside=True)
            self.kept = kept_heads(config)
            self.post_init()

        def get_input_embeddings(self):
            return self.units["emb.word"][0]

        def _prune_heads(self, heads_to_prune):
            _prune(self.units, self.kept, head_dim(self.config), heads_to_prune)

        def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                    output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
            if input_ids is None:
                raise ValueError(f"{type(self).__name__} needs input_ids")
            x, hidden, attentions = self._encode(self.units, input_ids, attention_mask, token_type_ids, position_ids,
                                                 output_attentions)
            out = BaseModelOutputWithPooling(
                last_hidden_state=x, pooler_output=None,
                hidden_states=hidden if _flag(output_hidden_states, self.config, "output_hidden_states") else None,
                attentions=attentions if _flag(output_attentions, self.config, "output_attentions") else None)
            return out if _flag(return_dict, self.config, "return_dict", True) else out.to_tuple()

    class Classifier(HeadprunePreTrainedModel, HeadpruneEncoder):
        base_model_prefix = prefix
        output_class = SequenceClassifierOutput

        def __init__(self, config):
            super().__init__(config)
            self.num_labels = config.num_labels
            self.add_module(prefix, Base(config))
            self.head_units = build_modules(self, config, prefix + ".", inside=False)
            self.post_init()

        def get_input_embeddings(self):
            return getattr(self, prefix).get_input_embeddings()

        def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None, labels=None,
                    output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
            if input_ids is None:
                raise ValueError(f"{type(self).__name__} needs input_ids")
            base = getattr(self, prefix)
            x, hidden, attentions = base._encode(base.units, input_ids, attention_mask, token_type_ids, position_ids,
                                                 output_attentions)
            logits = self._head({**base.units, **self.head_units}, x)
            loss = None
            if labels is not None:
                if self.output_class is TokenClassifierOutput:  # ignore_index -100, as transformers' taggers
                    loss = nn.functional.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
                elif self.num_labels == 1:
                    loss = nn.functional.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
                elif getattr(self.config, "problem_type", None) == "multi_label_classification":
                    loss = nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
                else:
                    loss = nn.functional.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
            result = self.output_class(
                loss=loss, logits=logits,
                hidden_states=hidden if _flag(output_hidden_states, self.config, "output_hidden_states") else None,
                attentions=attentions if _flag(output_attentions, self.config, "output_attentions") else None)
            return result if _flag(return_dict, self.config, "return_dict", True) else result.to_tuple()

    class ForSequenceClassification(Classifier):
        pass

    class ForTokenClassification(Classifier):
        output_class = TokenClassifierOutput

    for cls, suffix in ((Base, "Model"), (ForSequenceClassification, "ForSequenceClassification"),
                        (ForTokenClassification, "ForTokenClassification")):
        cls.config_class = config_class
        cls.__name__ = cls.__qualname__ = f"Headprune{arch}{suffix}"
    return Base, ForSequenceClassification, ForTokenClassification


def _flag(value, config, name, default=False):
    return value if value is not None else bool(getattr(config, name, default))


(HeadpruneBertModel, HeadpruneBertForSequenceClassification,
 HeadpruneBertForTokenClassification) = _make_classes("Bert", BertConfig, "bert")
(HeadpruneRobertaModel, HeadpruneRobertaForSequenceClassification,
 HeadpruneRobertaForTokenClassification) = _make_classes("Roberta", RobertaConfig, "roberta")
(HeadpruneXLMRobertaModel, HeadpruneXLMRobertaForSequenceClassification,
 HeadpruneXLMRobertaForTokenClassification) = _make_classes("XLMRoberta", XLMRobertaConfig, "roberta")
(HeadpruneDistilBertModel, HeadpruneDistilBertForSequenceClassification,
 HeadpruneDistilBertForTokenClassification) = _make_classes("DistilBert", DistilBertConfig, "distilbert")
(HeadpruneElectraModel, HeadpruneElectraForSequenceClassification,
 HeadpruneElectraForTokenClassification) = _make_classes("Electra", ElectraConfig, "electra")
