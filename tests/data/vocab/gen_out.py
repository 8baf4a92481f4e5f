#!/usr/bin/env python3
"""gen_out.py VOCAB.gguf OUT: write llama.cpp's token ids for each test string of VOCAB.gguf.inp.

The shared folder has no .out file for some vocabularies (deepseek-llm, falcon). This makes
one with llama.cpp itself: each string of VOCAB.gguf.inp (split on "\\n__ggml_vocab_test__\\n",
as test-tokenizer-0 does) is written to a file alone and tokenized by peer_tokenize
(add_special = parse_special = false); the ids go on one line each, in the .out format
(a leading space, ids separated by spaces). Run against the gpt-2 vocabulary it reproduces
the shared ggml-vocab-gpt-2.gguf.out exactly.

    make -C ../shared/peer      # builds /tmp/sift-peer/peer_tokenize
    python3 tests/data/vocab/gen_out.py ../shared/models/vocab/ggml-vocab-deepseek-llm.gguf \\
        tests/data/vocab/ggml-vocab-deepseek-llm.gguf.out
"""
import os
import subprocess
import sys
import tempfile

peer = os.path.join(os.environ.get("SIFT_PEER_DIR", "/tmp/sift-peer"), "peer_tokenize")
vocab, out = sys.argv[1], sys.argv[2]
parts = open(vocab + ".inp", "rb").read().split(b"\n__ggml_vocab_test__\n")
if parts and parts[-1] == b"":  # the file ends with a separator
    parts.pop()
lines = []
with tempfile.NamedTemporaryFile() as one:
    for p in parts:
        one.seek(0)
        one.truncate()
        one.write(p)
        one.flush()
        r = subprocess.run([peer, "-m", vocab, "-f", one.name, "-r", "1", "--ids", "--no-header"],
                           capture_output=True, check=True)
        lines.append(r.stdout.decode().strip())
with open(out, "w") as f:
    f.write("".join(" " + line + "\n" for line in lines))
print(out, len(lines), "lines")
