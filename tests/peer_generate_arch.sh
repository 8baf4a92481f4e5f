#!/usr/bin/env bash
# peer_generate_arch.sh - issue 28's CLI check: for every architecture sift runs, a random
# model of `sift mkmodel`'s tiny shape (--dim 256 --layers 4 --heads 4 --kv-heads 2 --ff 512)
# in F32, Q8_0 and Q4_K must give the same 16 greedy tokens from `sift generate --temp 0 -t 1`
# as llama.cpp's own peer_generate (../shared/peer) on the same file. The vocabulary is
# stories260K's (512 tokens), so the files stay small. gpt-oss also runs with its experts in
# MXFP4 (the rest F32, Q8_0, Q4_K), as its own files have them, and gemma4 again with
# per-layer embeddings of width 64 (E2B/E4B's second embedding table), with 8 experts, 2
# used, beside each layer's dense FFN (26B-A4B's shape), and with its own tokenizer model
# (`--tokenizer gemma4`: the vocabulary rewritten as Gemma 4's BPE over characters, so the
# prompt's tokens and the text's pieces are that tokenizer's). qwen35 at that shape is DeltaNet on
# layers 0-2 and gated attention on layer 3 (mkmodel's interval 4).
# usage: peer_generate_arch.sh SIFT PEER_GENERATE SHARED_DIR
set -u
sift=$1 peer=$2 shared=$3
dir=$(mktemp -d /tmp/sift_peer_gen_arch_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0 n=0
for arch in llama qwen2 qwen3 qwen3moe qwen35 qwen35moe gemma2 gemma3 gemma4 gemma4/ple gemma4/moe gemma4/tok granite smollm3 phi3 gpt-oss gpt-oss/mxfp4; do
    exps=${arch#*/}
    arch=${arch%/*}
    [ "$exps" = "$arch" ] && exps=
    case $exps in # the variant's mkmodel flags and its name in the report
        '') opts=() what= ;;
        ple) opts=(--ple 64) what=" (per-layer embeddings)" ;;
        moe) opts=(--experts 8 --experts-used 2) what=" (experts)" ;;
        tok) opts=(--tokenizer gemma4) what=" (gemma4 tokenizer)" ;;
        *) opts=(--type-exps "$exps") what=" ($exps experts)" ;;
    esac
    for type in f32 q8_0 q4_k; do
        f=$dir/$arch-$type${exps:+-$exps}.gguf
        if ! "$sift" mkmodel --arch "$arch" --dim 256 --layers 4 --heads 4 --kv-heads 2 --ff 512 --type "$type" \
                "${opts[@]}" --vocab "$shared/models/stories260K.gguf" -o "$f" >/dev/null; then
            echo "FAIL $arch $type$what: mkmodel"; fail=1; continue
        fi
        # the generated text, newlines dropped (peer_generate -v prints it between two "---"
        # lines; sift generate prints the prompt, then the text)
        want=$("$peer" -m "$f" -p "Once upon a time" -n 16 -t 1 -r 1 --no-warmup -v 2>&1 >/dev/null |
            sed -n '/^---$/,/^---$/p' | sed '1d;$d' | tr -d '\n')
        got=$("$sift" generate -m "$f" -p "Once upon a time" -n 16 --temp 0 -t 1 2>/dev/null | tr -d '\n')
        case $got in # the echoed prompt: SentencePiece's with its space prefix, gemma4's without
            " Once upon a time"*) got=${got# Once upon a time} ;;
            *) got=${got#Once upon a time} ;;
        esac
        n=$((n + 1))
        if [ -n "$want" ] && [ "$want" = "$got" ]; then
            echo "ok   $arch $type$what: $want"
        else
            echo "FAIL $arch $type$what: llama.cpp [$want] sift [$got]"; fail=1
        fi
    done
done
echo "$n models; $([ $fail = 0 ] && echo 'all identical to llama.cpp' || echo FAILED)"
exit $fail
