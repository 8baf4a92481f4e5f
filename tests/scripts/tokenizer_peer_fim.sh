#!/usr/bin/env bash
# The vocabularies `sift mkmodel --fim-style qwen|codellama` writes (stories260K with FIM tokens,
# for /infill), read by llama.cpp and by sift: the same FIM, EOT and end-of-generation ids, token
# attributes and tokenizations (tests/tokenizer_peer.c --quick).
#   tokenizer_peer_fim.sh SIFT STORIES260K.gguf TOKENIZER_PEER
set -euo pipefail
sift=$1 model=$2 peer=$3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
for s in qwen codellama; do "$sift" mkmodel --fim-style "$s" --from "$model" -o "$d/$s.gguf" >/dev/null; done
"$peer" --quick "$d/qwen.gguf" "$d/codellama.gguf"
