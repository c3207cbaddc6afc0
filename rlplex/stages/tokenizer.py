"""A tiny tokenizer made in code, so tests and the demo never download one.

Real runs load a Hugging Face tokenizer from ``model.path``; the toy task and
the tests only need digits and three special tokens. :class:`CharTokenizer`
maps each character of a fixed alphabet to one id and offers the handful of
attributes the rest of rlplex reads (``pad_token_id``, ``eos_token_id``,
``bos_token_id``, ``vocab_size``, ``encode``, ``decode``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"


class Tokenizer(Protocol):
    """What rlplex needs of a tokenizer (a ``transformers`` tokenizer fits too)."""

    pad_token_id: int
    eos_token_id: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str: ...


class CharTokenizerConfig(BaseModel):
    """The alphabet of a :class:`CharTokenizer`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alphabet: str = "0123456789+=:"
    """Characters with an id each, after the special tokens pad, bos and eos."""
    vocab_size: int = Field(16, ge=4)
    """Total ids, padded up with unused ids (a round size keeps embeddings tidy)."""


class CharTokenizer:
    """One id per character; ids 0, 1, 2 are pad, bos and eos."""

    def __init__(self, config: CharTokenizerConfig | None = None) -> None:
        config = config or CharTokenizerConfig()
        tokens = [PAD, BOS, EOS, *config.alphabet]
        if len(tokens) > config.vocab_size:
            raise ValueError(
                f"alphabet of {len(config.alphabet)} characters needs vocab_size >="
                f" {len(tokens)}, got {config.vocab_size}"
            )
        self.vocab_size = config.vocab_size
        self.id_to_token = tokens
        self.token_to_id = {t: i for i, t in enumerate(tokens)}
        self.pad_token_id = 0
        self.bos_token_id = 1
        self.eos_token_id = 2

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Ids of ``text`` (with a leading bos by default); unknown characters raise KeyError."""
        ids = [self.token_to_id[c] for c in text]
        return [self.bos_token_id, *ids] if add_bos else ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """The text of ``ids``; stops at the first eos when skipping special tokens."""
        out = []
        for i in ids:
            i = int(i)
            if skip_special_tokens and i == self.eos_token_id:
                break
            if i >= len(self.id_to_token) or (skip_special_tokens and i < 3):
                continue
            out.append(self.id_to_token[i])
        return "".join(out)
