"""A character-level tokenizer built with Hugging Face ``tokenizers``: one token per character.

The vocabulary is fixed (digits, the three operators, '=', and special tokens), so every model of this
project shares it whatever it was trained on. It is saved as ``tokenizer.json`` in each run directory
(model/checkpoint.py reads it back: ``tokenizer_from_json``).
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
from tokenizers.models import WordLevel

SPECIAL_TOKENS = ["[PAD]", "[BOS]", "[EOS]"]
CHARACTERS = list("0123456789") + list("+-*") + ["="]


class UnknownCharacterError(ValueError):
    """Raised for text holding a character outside the vocabulary."""


class CharTokenizer:
    """Thin wrapper over a ``tokenizers.Tokenizer`` that refuses unknown characters clearly."""

    def __init__(self, tokenizer: Tokenizer | None = None):
        self.tokenizer = tokenizer or self._build()
        self.vocab = self.tokenizer.get_vocab()
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.pad_id, self.bos_id, self.eos_id = (self.vocab[t] for t in SPECIAL_TOKENS)

    @staticmethod
    def _build() -> Tokenizer:
        vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + CHARACTERS)}
        tokenizer = Tokenizer(WordLevel(vocab))  # no [UNK]: unknown characters are refused in encode()
        tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
        tokenizer.decoder = decoders.Fuse()  # join characters without spaces
        tokenizer.add_special_tokens(SPECIAL_TOKENS)
        return tokenizer

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        bad = sorted({c for c in text if c not in self.vocab})
        if bad:
            raise UnknownCharacterError(
                f"unknown character(s) {', '.join(map(repr, bad))} in {text!r}; "
                f"the tokenizer knows digits 0-9, '+', '-', '*' and '='"
            )
        ids = self.tokenizer.encode(text).ids if text else []
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def decode(self, ids) -> str:
        """Token ids -> text, special tokens dropped."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def to_json(self) -> str:
        """tokenizer.json's text (a run directory writes it: ``RunDir.write_text``)."""
        return self.tokenizer.to_str(pretty=True)
