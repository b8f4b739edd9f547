"""Tiny random transformers, built from configs and saved to disk, for offline tests.

Every model loads through the normal ``from_pretrained`` path. ``initializer_range`` is large
(0.5) so that layers really differ: with the default 0.02 every layer ranks texts alike.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    BertConfig,
    Gemma3TextConfig,
    GPT2Config,
    LlamaConfig,
    MPNetConfig,
    PreTrainedTokenizerFast,
    Qwen2Config,
)

WORDS = (
    "the a an cat dog bird sat on mat man woman child plays guitar piano eats food apple "
    "runs walks fast slow red blue green big small is was and or not in of to with this "
    "sentence means one word house car tree river city day night good bad happy sad"
).split()

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>"]

TEXTS = [
    "the cat sat on the mat",
    "a dog runs fast",
    "the woman plays the guitar",
    "a man eats an apple",
    "the child walks in the city",
    "a big red car",
    "the small bird is happy",
    "this sentence means one word",
    "the river and the tree",
    "a sad man with a blue car",
    "good day",
    "the night was bad",
    "green house in the city",
    "a happy dog and a happy cat",
    "the piano is big",
    "woman eats food with a child",
]


def _tokenizer(encoder: bool) -> PreTrainedTokenizerFast:
    vocab = {token: i for i, token in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if encoder:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        bos_token="<s>",
        eos_token="</s>",
        padding_side="right" if encoder else "left",
        model_max_length=64,
    )


VOCAB_SIZE = len(SPECIALS) + len(WORDS)
COMMON = dict(initializer_range=0.5)


# what every tiny BERT-, MPNet-, Llama-, Qwen2- and Gemma-3-style model shares
SHAPE = dict(vocab_size=VOCAB_SIZE, hidden_size=32, intermediate_size=64, num_attention_heads=4, **COMMON)
DECODER = dict(
    num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, eos_token_id=6, bos_token_id=5
)


def _config(kind: str, num_layers: int):
    if kind == "bert":
        return BertConfig(num_hidden_layers=num_layers, max_position_embeddings=64, **SHAPE)
    if kind == "mpnet":
        return MPNetConfig(num_hidden_layers=num_layers, max_position_embeddings=66, **SHAPE)
    if kind == "llama":
        return LlamaConfig(num_hidden_layers=num_layers, **SHAPE, **DECODER)
    if kind == "qwen2":
        return Qwen2Config(num_hidden_layers=num_layers, **SHAPE, **DECODER)
    if kind == "gemma3":  # EmbeddingGemma's layout: a bidirectional Gemma-3 text model
        return Gemma3TextConfig(num_hidden_layers=num_layers, head_dim=8, sliding_window=4,
                                use_bidirectional_attention=True, **SHAPE, **DECODER)  # fmt: skip
    if kind == "gpt2":
        return GPT2Config(
            vocab_size=VOCAB_SIZE,
            n_embd=32,
            n_layer=num_layers,
            n_head=4,
            n_positions=64,
            pad_token_id=0,
            eos_token_id=6,
            bos_token_id=5,
            **COMMON,
        )
    raise ValueError(f"unknown tiny model kind {kind!r}")


ENCODERS = ("bert", "mpnet")
DECODERS = ("llama", "qwen2", "gpt2")
BIDIRECTIONAL = ("gemma3",)  # decoder blocks and tokenizer, attending both ways


def build_tiny_model(kind: str, path: Path, num_layers: int = 4, seed: int = 0) -> Path:
    """Build a tiny random ``kind`` model with its tokenizer and save both to ``path``."""
    torch.manual_seed(seed)
    config = _config(kind, num_layers)
    model = (AutoModel if kind in ENCODERS + BIDIRECTIONAL else AutoModelForCausalLM).from_config(config)
    model.eval()
    path = Path(path)
    model.save_pretrained(path)
    _tokenizer(encoder=kind in ENCODERS).save_pretrained(path)
    return path


def build_tiny_sentence_transformer(
    path: Path, pooling: str = "mean", num_layers: int = 4, seed: int = 0, kind: str = "bert"
) -> Path:
    """A SentenceTransformer folder (a tiny ``kind`` model + pooling + Normalize) saved to ``path``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    hf_dir = build_tiny_model(kind, Path(path).with_name(Path(path).name + "-hf"), num_layers, seed)
    transformer = Transformer(str(hf_dir), max_seq_length=64)
    st = SentenceTransformer(
        modules=[transformer, Pooling(transformer.get_embedding_dimension(), pooling), Normalize()],
        device="cpu",
    )
    st.save(str(path))
    return Path(path)


def load_tiny_tokenizer(path: Path) -> PreTrainedTokenizerFast:
    """Load a tiny model's tokenizer as saved (transformers 5's ``AutoTokenizer`` picks the class from
    ``config.model_type`` and would give Qwen2 a BPE tokenizer that our word-level vocab does not fit)."""
    return PreTrainedTokenizerFast.from_pretrained(str(path))
