"""Vocabularies and the tokenizer from GGUF files, grammars, and a JSON-schema-constrained
generation: with the shared stories260K model on sift's runtime, and over llama.cpp's
reference logits with the 32000-token llama vocabulary."""
import json

import numpy as np
import pytest

import sift

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def check_person(text):
    obj = json.loads(text)
    assert set(obj) == {"name", "age"}
    assert isinstance(obj["name"], str) and len(obj["name"]) <= 6
    assert isinstance(obj["age"], int) and 0 <= obj["age"] <= 99
    return obj


def test_tokenizer_matches_llama_cpp(shared):
    """llama.cpp's own tokenizer test vectors (ggml-vocab-*.gguf.inp/.out)."""
    base = shared / "models" / "vocab" / "ggml-vocab-llama-spm.gguf"
    vocab = sift.Vocab(base)
    assert vocab.n_tokens == 32000 and vocab.bos == 1 and vocab.eos == 2
    inputs = base.with_suffix(".gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    outputs = base.with_suffix(".gguf.out").read_text(encoding="utf-8").split("\n")
    n = 0
    for text, want in zip(inputs, outputs):
        got = vocab.tokenize(text, add_special=False).tolist()
        assert got == [int(t) for t in want.split()], repr(text)
        n += 1
    assert n >= 20
    ids = vocab.tokenize("Hello world")
    assert ids.tolist() == [1, 15043, 3186]
    assert vocab.detokenize(ids[1:]) == "Hello world"  # SentencePiece's leading space removed
    assert vocab.detokenize(ids, remove_special=True) == " Hello world"  # as llama.cpp: not after a BOS
    assert vocab.piece(15043) == b" Hello"
    with pytest.raises(IndexError):
        vocab.piece(32000)


def test_bad_grammar_and_vocab(shared, tmp_path):
    vocab = sift.Vocab(shared / "models" / "vocab" / "ggml-vocab-llama-spm.gguf")
    with pytest.raises(sift.SiftError, match="undefined rule .foo."):
        sift.Grammar(vocab, 'root ::= foo')  # an undefined rule
    with pytest.raises(sift.SiftError, match="JSON schema"):
        sift.Grammar.from_json_schema(vocab, "{not json")
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00")
    with pytest.raises(sift.SiftError):
        sift.Vocab(bad)


def with_suppress_tokens(src, dst, ids):
    """src's GGUF with tokenizer.ggml.suppress_tokens = ids (an int32 array) put first among
    its keys. Only for files without tensors (a vocabulary), whose bytes after the keys
    are not read."""
    import struct

    data = src.read_bytes()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", data)
    assert magic == b"GGUF" and n_tensors == 0
    key = b"tokenizer.ggml.suppress_tokens"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 5, len(ids)) + struct.pack(f"<{len(ids)}i", *ids)
    dst.write_bytes(struct.pack("<4sIQQ", magic, version, n_tensors, n_kv + 1) + kv + data[24:])
    return dst


def test_suppress_tokens(shared, tmp_path):
    """tokenizer.ggml.suppress_tokens: the list as llama.cpp's llama_vocab_get_suppress_tokens
    gives it (file order, ids outside the vocabulary dropped), and banned by from_params."""
    base = shared / "models" / "vocab" / "ggml-vocab-llama-spm.gguf"
    assert len(sift.Vocab(base).suppress_tokens) == 0
    vocab = sift.Vocab(with_suppress_tokens(base, tmp_path / "sup.gguf", [500, 7, -1, 40000, 31999]))
    assert vocab.suppress_tokens.tolist() == [500, 7, 31999]
    logits = np.zeros(vocab.n_tokens, dtype=np.float32)
    logits[500], logits[7], logits[31999], logits[1234] = 9.0, 8.0, 7.0, 6.0
    assert sift.Chain.from_params(vocab=vocab, temp=0).sample(logits) == 1234
    # without the vocabulary the chain cannot know them: the top logit wins
    assert sift.Chain.from_params(n_vocab=vocab.n_tokens, temp=0).sample(logits) == 500


def test_json_schema_generation_with_a_model(shared):
    """stories260K writes a person as JSON: grammar first, top_k + temp + dist."""
    model = sift.Model(shared / "models" / "stories260K.gguf", n_ctx=256, n_threads=1)
    vocab = model.vocab
    grammar = sift.Grammar.from_json_schema(vocab, SCHEMA)
    chain = sift.Chain.from_spec("top_k(20);temp(0.9);dist(7)", vocab=vocab)
    tokens = list(vocab.tokenize("Once upon a time"))
    logits = model.eval(tokens)
    out = []
    for _ in range(120):
        tok = chain.sample(logits, grammar=grammar, grammar_first=True)
        if vocab.is_eog(tok):
            break
        out.append(tok)
        logits = model.eval([tok])
    assert grammar.status in ("done", "can_end")
    check_person(vocab.detokenize(out))


def test_json_schema_generation_over_reference_logits(shared):
    """The same schema over llama.cpp's reference logits, in the rejection mode llama.cpp
    uses by default, batch-free: a 32000-token vocabulary and noisy logits still give
    valid JSON."""
    vocab = sift.Vocab(shared / "models" / "vocab" / "ggml-vocab-llama-spm.gguf")
    raw = np.fromfile(shared / "reference" / "sampling" / "logits_v32000.bin", dtype=np.uint8)
    x = np.frombuffer(raw[8:], dtype="<f4").reshape(-1, 32000)
    grammar = sift.Grammar.from_json_schema(vocab, SCHEMA)
    chain = sift.Chain.from_spec("top_k(40);dist(3)", vocab=vocab)
    out = []
    for t in range(300):
        row = x[t % x.shape[0]].copy()
        if grammar.status in ("done", "can_end"):
            row[vocab.eos] = row.max() + 10  # let the model end once the object may end
        tok = chain.sample(row, grammar=grammar)
        if tok == vocab.eos:
            break
        out.append(tok)
    check_person(vocab.detokenize(out))
