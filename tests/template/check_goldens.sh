#!/bin/sh
# Runs `sift apply-template` over every golden of the chat-template conformance set
# (shared/chat-templates, see its README) and requires byte-for-byte equality; where jinja2
# raised (a .error golden), sift must fail too (exit 1 with a message).
#   check_goldens.sh SIFT_BINARY CHAT_TEMPLATES_DIR [-v]
# Prints one line per mismatch and a summary "goldens matched N/M".
sift=$1
dir=$2
verbose=$3
[ -x "$sift" ] || { echo "no sift binary: $sift"; exit 2; }
[ -f "$dir/manifest.tsv" ] || { echo "no conformance set at $dir (SIFT_SHARED?)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
total=0
ok=0
tab=$(printf '\t')
while IFS="$tab" read -r tpl ctx status sha; do
    [ "$tpl" = template ] && continue
    total=$((total + 1))
    "$sift" apply-template --template "$dir/templates/$tpl.jinja" --context "$dir/contexts/$ctx.json" \
        --date 2024-07-26 > "$tmp/out" 2> "$tmp/err"
    rc=$?
    if [ "$status" = ok ]; then
        if [ $rc -eq 0 ] && cmp -s "$tmp/out" "$dir/goldens/${tpl}__${ctx}.txt"; then
            ok=$((ok + 1))
        else
            echo "MISMATCH $tpl $ctx (exit $rc): $(head -c 300 "$tmp/err")"
            [ -n "$verbose" ] && diff "$dir/goldens/${tpl}__${ctx}.txt" "$tmp/out" | head -20
        fi
    else
        if [ $rc -eq 1 ] && [ -s "$tmp/err" ]; then
            ok=$((ok + 1))
        else
            echo "SHOULD FAIL $tpl $ctx (exit $rc): jinja2 raised $(cat "$dir/goldens/${tpl}__${ctx}.error")"
        fi
    fi
done < "$dir/manifest.tsv"
echo "goldens matched $ok/$total"
[ "$ok" -eq "$total" ]
