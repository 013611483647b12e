"""Tiny randomly initialised Hugging Face checkpoints for the ``models build`` tests.

Both reuse the packaged all-MiniLM-L6-v2 tokenizer (offline). ``initializer_range`` is large
so that logits differ clearly between inputs (a near-uniform model would hide mapping or
padding mistakes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    from groundproxy.retrieval.embedder import model_path

    return AutoTokenizer.from_pretrained(str(model_path()))


def save_tiny_nli(out: Path, id2label: dict[int, str] | None = None) -> Path:
    """A 2-layer BertForSequenceClassification; the classifier bias favours entailment,
    then neutral, then contradiction, so the label mapping is visible in every output."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    labels = id2label or {0: "contradiction", 1: "entailment", 2: "neutral"}
    tok = _tokenizer()
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        initializer_range=0.2,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    model = BertForSequenceClassification(config)
    bias = {"entailment": 4.0, "neutral": 2.0, "contradiction": 0.0}
    with torch.no_grad():
        for idx, name in labels.items():
            model.classifier.bias[idx] = bias.get(name, 0.0)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def save_tiny_llama(out: Path) -> Path:
    """A 2-layer LlamaForCausalLM with a chat template (the SmolLM2 code path)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        initializer_range=0.5,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out
