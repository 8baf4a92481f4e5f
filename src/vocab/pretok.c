/*
 * pretok.c - byte-level BPE pre-tokenizers, splitting text exactly as llama.cpp does.
 *
 * llama.cpp (src/unicode.cpp, unicode_regex_split) runs each expression of a pre-tokenizer
 * in one of three ways, and the split it produces depends on which, so we run each one the
 * same way:
 *
 *  1. Two expressions have hand-written matchers: GPT-2's
 *       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
 *     and Llama 3's (its case-insensitive contractions written either way). We port those
 *     matchers (split_gpt2, split_llama3) with their quirks: a lone whitespace character
 *     that is no match of the expression still becomes its own piece, and the Llama 3
 *     punctuation branch tests the current code point's flags where the expression would
 *     test the next one's.
 *
 *  2. An expression using Unicode classes (\p{L}, \p{N}, \p{P}, \p{S}, \p{M}, \p{Lu}, ...)
 *     runs with std::regex (ECMAScript) on a "collapsed" text: one byte per code point,
 *     ASCII kept, non-ASCII whitespace folded to 0x0B, every other non-ASCII code point
 *     folded to a byte naming its class (0xD1 number, 0xD2 letter, 0xD3 punctuation, 0xD4
 *     mark, 0xD5 symbol, 0xD0 anything else), and each \p{X} rewritten to a class of that
 *     byte plus the ASCII members of X, as llama.cpp lists them (its \p{S} includes '~'; older
 *     versions lacked it). So \p{Lu} matches any letter, and \s matches only
 *     ASCII whitespace and the folded 0x0B. We build the same collapsed text and rewritten
 *     expression and run it with PCRE2 in 8-bit, non-UTF, non-UCP mode, whose \s, classes
 *     and ordered alternation behave like ECMAScript's here (PCRE2_DOLLAR_ENDONLY makes $
 *     match only at the end, as in ECMAScript).
 *
 *  3. Any other expression runs with std::wregex over the code points, non-ASCII
 *     whitespace folded to 0x0B (so \s, which std::wregex limits to ASCII in the "C"
 *     locale, still sees it). We run it with PCRE2's 32-bit library in non-UTF mode: a code
 *     unit is a code point, ranges compare code point values, \s/\d/\w are ASCII.
 *
 * A piece is split into "text before the match, the match, ..., text after the last match";
 * nothing is dropped. Empty matches (only in expressions made of lookaheads) end the text
 * before them and are themselves dropped; the next search follows std::regex_iterator (a
 * non-empty match anchored at the same place, else a search one code point further on).
 *
 * Why not PCRE2 with UTF+UCP on the real text: its \p{L} and \s come from PCRE2's Unicode
 * tables, llama.cpp's from its own generated table (Unicode 15.1, PCRE2 10.42 has 14.0) and
 * from the folding above (\p{Lu} = any letter, \s = ASCII whitespace or a folded 0x0B); they
 * disagree on real text.
 * Folding as llama.cpp does is exact by construction, and faster: the regex engine scans one
 * byte per code point with no UTF decoding.
 *
 * Everything here works on code point arrays and piece lengths in code points, as
 * llama.cpp's offsets are; the BPE session turns each piece back into bytes.
 */
#define PCRE2_CODE_UNIT_WIDTH 0
#include "vocab/pretok.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "vocab/unicode.h"

/* ---- the expressions (llama.cpp's llm_tokenizer_bpe, by pre-tokenizer type) -------------- */

#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_LLAMA3                                                                            \
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_LLAMA3_I                                                                         \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+" \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                         \
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_CJK_KANA "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+"
#define RX_PORO " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"
#define RX_UPPER_LOWER_WORDS(M)                                                             \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}" M "])([^a-z]))*((?=[\\p{L}" M "])([^A-Z]))+"        \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"                        \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}" M "])([^a-z]))+((?=[\\p{L}" M "])([^A-Z]))*"        \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"                        \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_CASED_WORDS                                                                    \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"                        \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
#define RX_DS3_WORDS(TAIL)                                                                   \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+" \
    "| ?[\\p{P}\\p{S}]+" TAIL "|\\s+(?!\\S)|\\s+"

static const char *const rx_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL};
static const char *const rx_llama3[] = {RX_LLAMA3, NULL};
static const char *const rx_jais2[] = {
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                    "\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|"
                    "\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    NULL};
static const char *const rx_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"
    "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5"
    "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA"
    "\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45"
    "\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE"
    "\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC"
    "\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3"
    "\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06"
    "\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3"
    "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
    "\U0001E900-\U0001E943]+",
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
    "\\s+$",
    "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
    "\\p{N}+",
    NULL};
static const char *const rx_deepseek3[] = {"\\p{N}{1,3}", RX_CJK_KANA, RX_DS3_WORDS("[\r\n]*|\\s*[\r\n]+"),
                                           NULL};
static const char *const rx_spark2_5[] = {"\\p{N}{1,3}", RX_CJK_KANA, RX_DS3_WORDS("|[\r\n]"), "\\p{N}", NULL};
static const char *const rx_youtu[] = {
    "[\uAC00-\uD7A3\u3131-\u318E]+|[\uFF01\u2026\u201C\u201D\u2018\u2019\u2014\uFF1A\uFF1B\uFF0C"
    "\u3001-\u303F\uFE30-\uFE4F]+|[\u3105-\u312F]+|" RX_CJK_KANA,
    RX_CASED_WORDS "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_deepseek_coder[] = {
    "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}", NULL};
static const char *const rx_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]", NULL};
static const char *const rx_starcoder[] = {"\\p{N}", RX_GPT2, NULL};
static const char *const rx_gpt2[] = {RX_GPT2, NULL};
static const char *const rx_qwen2[] = {RX_QWEN2, NULL};
static const char *const rx_qwen35[] = {
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
                    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_poro[] = {RX_PORO, NULL};
static const char *const rx_viking[] = {RX_PORO, "\\p{N}", NULL};
static const char *const rx_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_chameleon[] = {
    "<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2, NULL};
static const char *const rx_gpt4o[] = {RX_UPPER_LOWER_WORDS(""), NULL};
static const char *const rx_granite_emb_multi[] = {RX_UPPER_LOWER_WORDS("\\p{M}"), NULL};
static const char *const rx_superbpe[] = {"\\p{N}+", "(?=(\\d{3})+(?!\\d))", NULL};
static const char *const rx_bailingmoe[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_seed_coder[] = {
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
                    "\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_ufakzeka[] = {
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", NULL};
static const char *const rx_laguna[] = {"[^\\n]+|[\\n]+", RX_QWEN2, NULL};
static const char *const rx_newlines[] = {"[^\\n]+|[\\n]+", NULL};
static const char *const rx_exaone_moe[] = {
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
                    "[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const rx_minicpm5[] = {
    "\\p{N}{1,3}",
    RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                    "\\s+(?!\\S)|\\s+",
    NULL};

#define KEEP SIFT_PRE_KEEP_SPACES
#define DEF(var, names_, rx, fl) static const sift__pretok_def var = {names_, rx, fl}
/* The names and the settings they imply, in the order of llama.cpp's llama_vocab::impl::load. */
DEF(d_default, "default", rx_default, 0);
DEF(d_minicpm5, "minicpm5", rx_minicpm5, SIFT_PRE_IGNORE_MERGES);
DEF(d_llama3, "llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano", rx_llama3,
    SIFT_PRE_IGNORE_MERGES | SIFT_PRE_ADD_BOS);
DEF(d_deepseek_llm, "deepseek-llm", rx_deepseek_llm, KEEP);
DEF(d_deepseek_coder, "deepseek-coder", rx_deepseek_coder, KEEP);
DEF(d_deepseek3, "deepseek-v3|hunyuan-dense|hy_v4|joyai-llm", rx_deepseek3, KEEP);
DEF(d_spark2_5, "spark2_5", rx_spark2_5, KEEP);
DEF(d_youtu, "youtu", rx_youtu, KEEP | SIFT_PRE_IGNORE_MERGES);
DEF(d_falcon, "falcon", rx_falcon, 0);
DEF(d_starcoder, "starcoder|refact|codeshell|exaone|minerva-7b|mellum2", rx_starcoder, 0);
DEF(d_gpt2_names, "mpt|gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|"
                  "exaone4|olmo|jais",
    rx_gpt2, 0);
DEF(d_jais2, "jais-2", rx_jais2, 0);
DEF(d_gpt2_sep, "jina-v1-en|jina-v2-code|roberta-bpe", rx_gpt2, SIFT_PRE_ADD_SEP);
DEF(d_starcoder_keep, "command-r|smollm", rx_starcoder, KEEP);
DEF(d_qwen2, "qwen2|deepseek-r1-qwen|kormo|f2llmv2|hunyuan|solar-open", rx_qwen2, KEEP);
DEF(d_qwen2_clean, "stablelm2|megrez", rx_qwen2, 0);
DEF(d_qwen35, "qwen35", rx_qwen35, KEEP);
DEF(d_dbrx, "dbrx|smaug-bpe", rx_llama3, 0);
DEF(d_poro, "poro-chat", rx_poro, KEEP);
DEF(d_bloom, "bloom|gpt3-finnish", rx_poro, 0);
DEF(d_chatglm, "glm4|chatglm-bpe", rx_llama3, SIFT_PRE_NO_BOS);
DEF(d_viking, "viking", rx_viking, KEEP);
DEF(d_tekken, "tekken", rx_tekken, KEEP | SIFT_PRE_IGNORE_MERGES | SIFT_PRE_ADD_BOS);
DEF(d_exaone_moe, "exaone-moe", rx_exaone_moe, 0);
DEF(d_chameleon, "chameleon", rx_chameleon, KEEP | SIFT_PRE_ADD_BOS);
DEF(d_gpt4o, "gpt-4o|llama4|kanana2|talkie|minimax-m2", rx_gpt4o, KEEP);
DEF(d_granite_emb, "granite-embed-multi-97m", rx_granite_emb_multi, KEEP | SIFT_PRE_IGNORE_MERGES);
/* not here: tiny_aya/cohere2moe - their \d{1,3}(?=(?:\d{3})*\b) meets a quirk of libstdc++'s
 * std::wregex (a word boundary inside a lookahead) that llama.cpp's splits depend on; kimi-k2 and
 * afmoe (custom code in llama.cpp); sarvam-moe, whitespace (other tokenizer models); gemma4, below */
DEF(d_superbpe, "superbpe", rx_superbpe, KEEP);
DEF(d_gpt2_keep, "trillion|granite-docling", rx_gpt2, KEEP);
DEF(d_bailingmoe, "bailingmoe|bailingmoe2|llada-moe", rx_bailingmoe, KEEP);
DEF(d_seed_coder, "seed-coder", rx_seed_coder, KEEP);
DEF(d_ufakzeka, "ufakzeka", rx_ufakzeka, KEEP);
DEF(d_grok2, "grok-2", rx_qwen2, KEEP);
DEF(d_laguna, "laguna", rx_laguna, KEEP);
#undef DEF
#undef KEEP

const sift__pretok_def sift__pretok_gemma4 = {"gemma4", rx_newlines, SIFT_PRE_CHARS | SIFT_PRE_ADD_BOS};

const sift__pretok_def *const sift__pretok_defs[] = {
    &d_default, &d_minicpm5, &d_llama3, &d_deepseek_llm, &d_deepseek_coder, &d_deepseek3, &d_spark2_5,
    &d_youtu, &d_falcon, &d_starcoder, &d_gpt2_names, &d_jais2, &d_gpt2_sep, &d_starcoder_keep,
    &d_qwen2, &d_qwen2_clean, &d_qwen35, &d_dbrx, &d_poro, &d_bloom, &d_chatglm, &d_viking, &d_tekken,
    &d_exaone_moe, &d_chameleon, &d_gpt4o, &d_granite_emb, &d_superbpe, &d_gpt2_keep,
    &d_bailingmoe, &d_seed_coder, &d_ufakzeka, &d_grok2, &d_laguna, NULL};

static int name_in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

const sift__pretok_def *sift__pretok_find(const char *pre)
{
    if (!pre || !*pre) return &d_default;
    for (const sift__pretok_def *const *d = sift__pretok_defs; *d; d++)
        if (name_in_list((*d)->names, pre)) return *d;
    return NULL;
}

/* ---- compiled form ------------------------------------------------------------------------ */

typedef enum { STEP_GPT2, STEP_LLAMA3, STEP_COLLAPSED, STEP_WIDE } step_kind;

typedef struct {
    step_kind kind;
    pcre2_code_8 *re8;
    pcre2_code_32 *re32;
    bool jit; /* JIT-compiled: use pcre2_jit_match (no per-call option checks) */
} pretok_step;

#define MAX_STEPS 8

struct sift__pretok {
    int n_steps;
    pretok_step steps[MAX_STEPS];
    bool need_collapsed, need_wide;
};

/* The \p{...} names llama.cpp folds, with the byte they fold to and their ASCII members
 * (written for use inside a character class). */
typedef struct {
    const char *name;
    char byte;
    const char *ascii;
} ucat;

static const ucat ucats[] = {
    {"\\p{N}", (char)0xD1, "\x30-\x39"},
    {"\\p{L}", (char)0xD2, "\x41-\x5A\x61-\x7A"},
    {"\\p{P}", (char)0xD3, "\x21-\x23\x25-\x2A\x2C-\x2F\x3A-\x3B\x3F-\x40\\\x5B-\\\x5D\x5F\\\x7B\\\x7D"},
    {"\\p{M}", (char)0xD4, ""},
    {"\\p{S}", (char)0xD5, "\\\x24\\\x2B\x3C-\x3E\x5E\x60\\\x7C\\\x7E"}, /* $+<=>^`|~ */
    {"\\p{Lu}", (char)0xD2, "\x41-\x5A\x61-\x7A"},
    {"\\p{Ll}", (char)0xD2, "\x41-\x5A\x61-\x7A"},
    {"\\p{Lt}", (char)0xD2, "\x41-\x5A\x61-\x7A"},
    {"\\p{Lm}", (char)0xD2, "\x41-\x5A\x61-\x7A"},
    {"\\p{Lo}", (char)0xD2, "\x41-\x5A\x61-\x7A"},
};
#define N_UCATS (sizeof ucats / sizeof ucats[0])

static bool uses_ucat(const char *rx)
{
    for (size_t i = 0; i < N_UCATS; i++)
        if (strstr(rx, ucats[i].name)) return true;
    return false;
}

/* llama.cpp's rewrite of an expression for the collapsed text. Returns a malloc'd string. */
static char *collapse_regex(const char *rx, size_t *out_len)
{
    size_t n = strlen(rx);
    char *out = malloc(n * 16 + 1); /* each \p{..} (>= 5 chars) grows to at most 40 */
    if (!out) return NULL;
    size_t k = 0;
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        if (rx[i] == '[' && (i == 0 || rx[i - 1] != '\\')) {
            out[k++] = '[';
            inside = true;
            continue;
        }
        if (inside && rx[i] == ']' && rx[i - 1] != '\\') {
            out[k++] = ']';
            inside = false;
            continue;
        }
        if (rx[i] == '\\' && i + 3 < n && rx[i + 1] == 'p' && rx[i + 2] == '{') {
            const char *close = strchr(rx + i + 3, '}');
            if (close && (size_t)(close - rx) <= i + 10) {
                size_t plen = (size_t)(close - rx) - i + 1;
                const ucat *u = NULL;
                for (size_t c = 0; c < N_UCATS; c++)
                    if (strlen(ucats[c].name) == plen && !memcmp(ucats[c].name, rx + i, plen)) u = &ucats[c];
                if (u) {
                    if (!inside) out[k++] = '[';
                    out[k++] = u->byte;
                    size_t al = strlen(u->ascii);
                    memcpy(out + k, u->ascii, al);
                    k += al;
                    if (!inside) out[k++] = ']';
                    i += plen - 1;
                    continue;
                }
            }
        }
        out[k++] = rx[i];
    }
    out[k] = 0;
    *out_len = k;
    return out;
}

static int compile_error(sift_error *err, const char *rx, int code, size_t offset)
{
    PCRE2_UCHAR8 msg[128];
    pcre2_get_error_message_8(code, msg, sizeof msg);
    return sift__error_set(err, SIFT_E_INVAL, "pre-tokenizer regex '%.60s': %s at offset %zu", rx, (char *)msg,
                          offset);
}

void sift__pretok_free(sift__pretok *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_steps; i++) {
        pcre2_code_free_8(p->steps[i].re8);
        pcre2_code_free_32(p->steps[i].re32);
    }
    free(p);
}

sift__pretok *sift__pretok_new(const char *const *regexes, sift_error *err)
{
    sift__pretok *p = calloc(1, sizeof *p);
    if (!p) {
        sift__error_set(err, SIFT_E_NOMEM, "out of memory");
        return NULL;
    }
    for (const char *const *r = regexes; *r; r++) {
        if (p->n_steps == MAX_STEPS) {
            sift__error_set(err, SIFT_E_INVAL, "pre-tokenizer has more than %d expressions", MAX_STEPS);
            goto fail;
        }
        pretok_step *st = &p->steps[p->n_steps++];
        int code;
        PCRE2_SIZE off;
        if (!strcmp(*r, RX_GPT2)) {
            st->kind = STEP_GPT2;
        } else if (!strcmp(*r, RX_LLAMA3) || !strcmp(*r, RX_LLAMA3_I)) {
            st->kind = STEP_LLAMA3;
        } else if (uses_ucat(*r)) {
            for (const unsigned char *c = (const unsigned char *)*r; *c; c++)
                if (*c >= 0x80) { /* llama.cpp refuses this mix too */
                    sift__error_set(err, SIFT_E_INVAL, "pre-tokenizer regex '%.60s' mixes \\p{..} and non-ASCII", *r);
                    goto fail;
                }
            size_t len;
            char *crx = collapse_regex(*r, &len);
            if (!crx) {
                sift__error_set(err, SIFT_E_NOMEM, "out of memory");
                goto fail;
            }
            st->kind = STEP_COLLAPSED;
            st->re8 = pcre2_compile_8((PCRE2_SPTR8)crx, len, PCRE2_DOLLAR_ENDONLY, &code, &off, NULL);
            free(crx);
            if (!st->re8) {
                compile_error(err, *r, code, off);
                goto fail;
            }
            st->jit = pcre2_jit_compile_8(st->re8, PCRE2_JIT_COMPLETE) == 0; /* else the interpreter */
            p->need_collapsed = true;
        } else {
            size_t n = strlen(*r);
            uint32_t *w = malloc(sizeof *w * (n + 1));
            if (!w) {
                sift__error_set(err, SIFT_E_NOMEM, "out of memory");
                goto fail;
            }
            size_t nw = sift__utf8_to_cpts(*r, n, w);
            st->kind = STEP_WIDE;
            st->re32 = pcre2_compile_32((PCRE2_SPTR32)w, nw, PCRE2_DOLLAR_ENDONLY, &code, &off, NULL);
            free(w);
            if (!st->re32) {
                compile_error(err, *r, code, off);
                goto fail;
            }
            st->jit = pcre2_jit_compile_32(st->re32, PCRE2_JIT_COMPLETE) == 0;
            p->need_wide = true;
        }
    }
    return p;
fail:
    sift__pretok_free(p);
    return NULL;
}

/* ---- splitting ----------------------------------------------------------------------------- */

void sift__pretok_scratch_free(sift__pretok_scratch *s)
{
    free(s->collapsed);
    free(s->wide);
    free(s->pieces);
    free(s->next);
    pcre2_match_data_free_8(s->md8);
    pcre2_match_data_free_32(s->md32);
    pcre2_match_context_free_8(s->mctx8);
    pcre2_match_context_free_32(s->mctx32);
    pcre2_jit_stack_free_8(s->jit8);
    pcre2_jit_stack_free_32(s->jit32);
    memset(s, 0, sizeof *s);
}

static int reserve_u32(uint32_t **buf, size_t *cap, size_t n)
{
    if (n <= *cap) return 0;
    size_t nc = *cap ? *cap : 256;
    while (nc < n) nc *= 2;
    uint32_t *nb = realloc(*buf, sizeof *nb * nc);
    if (!nb) return SIFT_E_NOMEM;
    *buf = nb;
    *cap = nc;
    return 0;
}

/* Output of one step: piece lengths appended to s->next. */
typedef struct {
    sift__pretok_scratch *s;
    size_t n;
    int status;
} piece_out;

static inline void emit(piece_out *o, size_t len)
{
    if (!len) return;
    if (o->n == o->s->cap_next && reserve_u32(&o->s->next, &o->s->cap_next, o->n + 1)) {
        o->status = SIFT_E_NOMEM;
        return;
    }
    o->s->next[o->n++] = (uint32_t)len;
}

#define OUT_OF_RANGE 0xFFFFFFFFu

/* GPT-2's expression, as llama.cpp's unicode_regex_split_custom_gpt2 matches it. */
static void split_gpt2(piece_out *o, const uint32_t *cpts, const uint16_t *fl, size_t ini, size_t end)
{
#define CPT(i) ((i) < end ? cpts[i] : OUT_OF_RANGE)
#define FLG(i) ((i) < end ? fl[i] : 0)
    size_t prev = ini;
#define TOKEN(e) (emit(o, (e) - prev), prev = (e)) /* e must have no side effects */
    for (size_t pos = ini; pos < end;) {
        uint32_t cpt = cpts[pos];
        uint16_t f = fl[pos];
        if (cpt == '\'' && pos + 1 < end) { /* 's|'t|'re|'ve|'m|'ll|'d */
            uint32_t nx = cpts[pos + 1];
            if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') {
                pos += 2;
                TOKEN(pos);
                continue;
            }
            if (pos + 2 < end) {
                uint32_t nn = cpts[pos + 2];
                if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l')) {
                    pos += 3;
                    TOKEN(pos);
                    continue;
                }
            }
        }
        uint16_t f2 = cpt == ' ' ? FLG(pos + 1) : f;
        if (f2 & SIFT_U_LETTER) { /*  ?\p{L}+ */
            pos += cpt == ' ';
            while (FLG(pos) & SIFT_U_LETTER) pos++;
            TOKEN(pos);
            continue;
        }
        if (f2 & SIFT_U_NUMBER) { /*  ?\p{N}+ */
            pos += cpt == ' ';
            while (FLG(pos) & SIFT_U_NUMBER) pos++;
            TOKEN(pos);
            continue;
        }
        const uint16_t wln = SIFT_U_WHITESPACE | SIFT_U_LETTER | SIFT_U_NUMBER;
        if (!(f2 & wln) && f2) { /*  ?[^\s\p{L}\p{N}]+ */
            pos += cpt == ' ';
            while (!(f2 & wln) && f2) {
                pos++;
                f2 = FLG(pos);
            }
            TOKEN(pos);
            continue;
        }
        size_t nws = 0;
        while (FLG(pos + nws) & SIFT_U_WHITESPACE) nws++;
        if (nws > 1 && CPT(pos + nws) != OUT_OF_RANGE) { /* \s+(?!\S) */
            pos += nws - 1;
            TOKEN(pos);
            continue;
        }
        if (nws > 0) { /* \s+ */
            pos += nws;
            TOKEN(pos);
            continue;
        }
        pos++; /* no match: one code point */
        TOKEN(pos);
    }
#undef TOKEN
#undef CPT
#undef FLG
}

/* Llama 3's expression, as llama.cpp's unicode_regex_split_custom_llama3 matches it. */
static void split_llama3(piece_out *o, const uint32_t *cpts, const uint16_t *fl, size_t ini, size_t end)
{
#define CPT(i) ((i) < end ? cpts[i] : OUT_OF_RANGE)
#define FLG(i) ((i) < end ? fl[i] : 0)
    size_t prev = ini;
#define TOKEN(e) (emit(o, (e) - prev), prev = (e)) /* e must have no side effects */
    for (size_t pos = ini; pos < end;) {
        uint32_t cpt = cpts[pos];
        uint16_t f = fl[pos];
        if (cpt == '\'' && pos + 1 < end) { /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
            uint32_t nx = sift__unicode_tolower(cpts[pos + 1]);
            if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') {
                pos += 2;
                TOKEN(pos);
                continue;
            }
            if (pos + 2 < end) {
                uint32_t nn = sift__unicode_tolower(cpts[pos + 2]);
                if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l')) {
                    pos += 3;
                    TOKEN(pos);
                    continue;
                }
            }
        }
        if (!(cpt == '\r' || cpt == '\n' || (f & SIFT_U_NUMBER))) { /* [^\r\n\p{L}\p{N}]?\p{L}+ */
            if ((f & SIFT_U_LETTER) || (FLG(pos + 1) & SIFT_U_LETTER)) {
                pos++;
                while (FLG(pos) & SIFT_U_LETTER) pos++;
                TOKEN(pos);
                continue;
            }
        }
        if (f & SIFT_U_NUMBER) { /* \p{N}{1,3} */
            size_t first = pos;
            while (FLG(pos) & SIFT_U_NUMBER) {
                if (++pos - first >= 3) {
                    TOKEN(pos);
                    first = pos;
                }
            }
            TOKEN(pos);
            continue;
        }
        const uint16_t wln = SIFT_U_WHITESPACE | SIFT_U_LETTER | SIFT_U_NUMBER;
        uint16_t f2 = cpt == ' ' ? FLG(pos + 1) : f;
        if (!(f2 & wln) && f) { /*  ?[^\s\p{L}\p{N}]+[\r\n]* (note: f, as llama.cpp) */
            pos += cpt == ' ';
            while (!(f2 & wln) && f2) {
                pos++;
                f2 = FLG(pos);
            }
            uint32_t c2 = CPT(pos);
            while (c2 == '\r' || c2 == '\n') {
                pos++;
                c2 = CPT(pos);
            }
            TOKEN(pos);
            continue;
        }
        size_t nws = 0, last_rn = 0;
        while (FLG(pos + nws) & SIFT_U_WHITESPACE) {
            uint32_t c2 = CPT(pos + nws);
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) { /* \s*[\r\n]+ */
            pos = last_rn;
            TOKEN(pos);
            continue;
        }
        if (nws > 1 && CPT(pos + nws) != OUT_OF_RANGE) { /* \s+(?!\S) */
            pos += nws - 1;
            TOKEN(pos);
            continue;
        }
        if (nws > 0) { /* \s+ */
            pos += nws;
            TOKEN(pos);
            continue;
        }
        pos++;
        TOKEN(pos);
    }
#undef TOKEN
#undef CPT
#undef FLG
}

/* One PCRE2 search; 1 = match in ov[0..1], 0 = none, <0 = engine error. The JIT stack
 * grows on demand (deep backtracking on long inputs). */
#define DEFINE_SEARCH(W)                                                                             \
    static int search_##W(const pcre2_code_##W *re, bool jit, sift__pretok_scratch *s,                \
                          PCRE2_SPTR##W subj, size_t len, size_t start, uint32_t opts, size_t ov[2])  \
    {                                                                                                \
        if (!s->md##W && !(s->md##W = pcre2_match_data_create_##W(16, NULL))) return SIFT_E_NOMEM;     \
        for (;;) {                                                                                   \
            int rc = jit && !(opts & PCRE2_ANCHORED) /* pcre2_jit_match refuses ANCHORED */          \
                         ? pcre2_jit_match_##W(re, subj, len, start, opts, s->md##W, s->mctx##W)       \
                         : pcre2_match_##W(re, subj, len, start, opts, s->md##W, s->mctx##W);          \
            if (rc >= 0) {                                                                           \
                PCRE2_SIZE *v = pcre2_get_ovector_pointer_##W(s->md##W);                               \
                ov[0] = v[0];                                                                        \
                ov[1] = v[1];                                                                        \
                return 1;                                                                            \
            }                                                                                        \
            if (rc == PCRE2_ERROR_NOMATCH) return 0;                                                 \
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !s->jit##W) {                                      \
                if (!(s->mctx##W = pcre2_match_context_create_##W(NULL))) return SIFT_E_NOMEM;        \
                if (!(s->jit##W = pcre2_jit_stack_create_##W(1 << 16, 1 << 26, NULL))) return SIFT_E_NOMEM; \
                pcre2_jit_stack_assign_##W(s->mctx##W, NULL, s->jit##W);                                \
                continue;                                                                            \
            }                                                                                        \
            return SIFT_E_INVAL;                                                                     \
        }                                                                                            \
    }
DEFINE_SEARCH(8)
DEFINE_SEARCH(32)

/* Split [ini, end) by one expression: text between matches and the matches themselves, the
 * matches found as std::regex_iterator finds them. */
static void split_regex(piece_out *o, const pretok_step *st, const void *text, size_t ini, size_t end)
{
    size_t len = end - ini, pos = 0, prev = 0, ov[2];
    uint32_t opts = 0;
    while (pos <= len) {
        int rc = st->kind == STEP_COLLAPSED
                     ? search_8(st->re8, st->jit, o->s, (PCRE2_SPTR8)text + ini, len, pos, opts, ov)
                     : search_32(st->re32, st->jit, o->s, (PCRE2_SPTR32)text + ini, len, pos, opts, ov);
        if (rc < 0) {
            o->status = rc;
            return;
        }
        if (rc == 0) {
            if (opts) { /* no non-empty match right after an empty one: look further on */
                opts = 0;
                pos++;
                continue;
            }
            break;
        }
        emit(o, ov[0] - prev); /* the text before the match */
        emit(o, ov[1] - ov[0]);
        prev = ov[1];
        pos = ov[1];
        if (ov[0] == ov[1]) {
            if (pos == len) break;
            opts = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
        } else {
            opts = 0;
        }
    }
    emit(o, len - prev);
}

int sift__pretok_split(const sift__pretok *p, sift__pretok_scratch *s, const uint32_t *cpts,
                      const uint16_t *flags, size_t n, const uint32_t **pieces, size_t *n_pieces)
{
    if (n > UINT32_MAX) return SIFT_E_INVAL;
    if (p->need_collapsed || p->need_wide) {
        /* PAD zeroed units after the text: PCRE2's JIT scans ahead of the subject's end with
         * wide loads (harmless, but reading uninitialised bytes offends valgrind) */
        enum { PAD = 64 };
        if (n + PAD > s->cap_text) {
            size_t nc = n + PAD < 4096 ? 4096 : n + PAD;
            free(s->collapsed);
            free(s->wide);
            s->collapsed = malloc(nc);
            s->wide = malloc(sizeof *s->wide * nc);
            s->cap_text = s->collapsed && s->wide ? nc : 0;
            if (!s->cap_text) return SIFT_E_NOMEM;
        }
        memset(s->collapsed + n, 0, PAD);
        memset(s->wide + n, 0, sizeof *s->wide * PAD);
        for (size_t i = 0; i < n; i++) {
            uint32_t c = cpts[i];
            uint16_t f = flags[i];
            if (c < 0x80) {
                s->collapsed[i] = (uint8_t)c;
                s->wide[i] = c;
                continue;
            }
            if (f & SIFT_U_WHITESPACE) {
                s->collapsed[i] = 0x0B;
                s->wide[i] = 0x0B;
                continue;
            }
            s->wide[i] = c;
            s->collapsed[i] = (f & SIFT_U_NUMBER)   ? 0xD1
                              : (f & SIFT_U_LETTER) ? 0xD2
                              : (f & SIFT_U_PUNCT)  ? 0xD3
                              : (f & SIFT_U_MARK)   ? 0xD4
                              : (f & SIFT_U_SYMBOL) ? 0xD5
                                                    : 0xD0;
        }
    }
    if (reserve_u32(&s->pieces, &s->cap_pieces, 1)) return SIFT_E_NOMEM;
    size_t np = 0;
    if (n) s->pieces[np++] = (uint32_t)n;
    for (int k = 0; k < p->n_steps; k++) {
        const pretok_step *st = &p->steps[k];
        piece_out o = {s, 0, 0};
        size_t start = 0;
        for (size_t i = 0; i < np && !o.status; i++) {
            size_t end = start + s->pieces[i];
            switch (st->kind) {
            case STEP_GPT2: split_gpt2(&o, cpts, flags, start, end); break;
            case STEP_LLAMA3: split_llama3(&o, cpts, flags, start, end); break;
            case STEP_COLLAPSED: split_regex(&o, st, s->collapsed, start, end); break;
            case STEP_WIDE: split_regex(&o, st, s->wide, start, end); break;
            }
            start = end;
        }
        if (o.status) return o.status;
        uint32_t *t = s->pieces;
        s->pieces = s->next;
        s->next = t;
        size_t tc = s->cap_pieces;
        s->cap_pieces = s->cap_next;
        s->cap_next = tc;
        np = o.n;
    }
    *pieces = s->pieces;
    *n_pieces = np;
    return 0;
}
