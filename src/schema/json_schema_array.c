/*
 * json_schema_array.c - arrays for the JSON schema converter: items with minItems /
 * maxItems, tuples (prefixItems, or draft-07's items array) followed by the other items
 * (items / additionalItems), a tuple's tail optional below minItems. Kept apart so that the
 * tuple rules (which differ between drafts) are in one place; see json_schema.c.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/json_schema_int.h"

static const char *visit_array_items(conv *c, const cJSON *s, const char *name, const char *rule_name, const cJSON *items,
                                     const cJSON *prefix, long mn, long mx);

/* contains (with minContains n, default 1): some n items validate against contains (and, as
 * every item, against items). With I the items' rule and W = {"allOf": [items, contains]}'s,
 * the array is  I* W (I* W){n-1} I*  (commas between): exact, each witness in its own
 * place. Refused by name beside what would need counting or a complement: maxContains,
 * maxItems, minItems above n, a tuple (prefixItems / an items array); n at most 8. n = 0:
 * contains says nothing. */
#define JS_MAX_CONTAINS 8
static const char *visit_contains(conv *c, const cJSON *s, const char *name, const char *rule_name, const cJSON *contains, long mn, long mx)
{
    static const char *const beside[] = {"maxContains", "prefixItems", "maxItems", NULL};
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    long need = sift__js_get_count(c, s, "minContains", 1);
    const char *bad = NULL;
    for (const char *const *k = beside; *k && !bad; k++)
        if (cJSON_GetObjectItemCaseSensitive(s, *k)) bad = *k;
    if (cJSON_IsArray(items)) bad = "items";
    if (need == -2) return NULL;
    if (!bad && need == 0) return visit_array_items(c, s, name, rule_name, items, NULL, mn, mx);
    if (!bad && mn > need) bad = "minItems";
    if (bad || need > JS_MAX_CONTAINS) {
        size_t o = sift__js_path_push(c, "contains");
        if (bad) sift__js_cfail(c, SIFT_E_UNSUPPORTED, "contains beside '%s' cannot be expressed in a grammar", bad);
        else sift__js_cfail(c, SIFT_E_UNSUPPORTED, "minContains above %d cannot be expressed in a grammar", JS_MAX_CONTAINS);
        sift__js_path_pop(c, o);
        return NULL;
    }
    const char *ir = NULL, *wr = NULL;
    char *in = sift__js_join_name(name, "item"), *wn = sift__js_join_name(name, "contains");
    cJSON *w = cJSON_CreateObject(), *list = w ? cJSON_AddArrayToObject(w, "allOf") : NULL;
    if (!in || !wn || !list || (items && !cJSON_AddItemToArray(list, cJSON_Duplicate(items, 1))) ||
        !cJSON_AddItemToArray(list, cJSON_Duplicate(contains, 1))) {
        sift__js_coom(c);
        goto out;
    }
    size_t o = sift__js_path_push(c, "items");
    ir = !items || cJSON_IsTrue(items) ? sift__js_use_builtin(c, "value") : sift__js_visit(c, items, in, NULL);
    sift__js_path_pop(c, o);
    o = sift__js_path_push(c, "contains");
    if (ir) wr = sift__js_visit(c, w, wn, NULL);
    sift__js_path_pop(c, o);
    if (!wr || !sift__js_use_builtin(c, "space")) goto out; /* no item can be a witness: unsat, as the visit says */
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_printf(&b, "\"[\" space (%s \",\" space)* %s", ir, wr);
    for (long k = 1; k < need; k++) sift__gbnf_sb_printf(&b, " \",\" space (%s \",\" space)* %s", ir, wr);
    sift__gbnf_sb_printf(&b, " (\",\" space %s)* \"]\" space", ir);
    wr = sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
    sift__gbnf_sb_free(&b);
out:
    (void)mx;
    cJSON_Delete(w);
    sift__gx_free(in);
    sift__gx_free(wn);
    return c->status == SIFT_OK ? wr : NULL;
}

const char *sift__js_visit_array(conv *c, const cJSON *s, const char *name, const char *rule_name)
{
    long mn = sift__js_get_count(c, s, "minItems", 0), mx = sift__js_get_count(c, s, "maxItems", -1);
    if (mn == -2 || mx == -2) return NULL;
    if (mx >= 0 && mx < mn) return (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "maxItems is below minItems"));
    /* a grammar repeats an item at most 2000 times (GBNF's limit, llama.cpp's too): name the
     * keyword rather than fail later with a grammar that does not parse */
    if (mn > 2000 || mx > 2000) {
        size_t o = sift__js_path_push(c, mn > 2000 ? "minItems" : "maxItems");
        sift__js_cfail(c, SIFT_E_UNSUPPORTED, "%s %ld exceeds the grammar's repetition limit (2000)", mn > 2000 ? "minItems" : "maxItems",
              mn > 2000 ? mn : mx);
        sift__js_path_pop(c, o);
        return NULL;
    }
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *contains = cJSON_GetObjectItemCaseSensitive(s, "contains");
    if (contains && !(c->flags & SIFT_JSON_SCHEMA_LENIENT)) return visit_contains(c, s, name, rule_name, contains, mn, mx);
    cJSON *any_item = NULL;
    if (cJSON_IsArray(items) && !prefix) { /* draft-07 tuple form: additionalItems (missing: anything) after it */
        prefix = items;
        items = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
        if (!items) items = any_item = cJSON_CreateTrue();
        if (!items) return sift__js_coom(c);
    } else if (prefix && !items) { /* 2020-12: prefixItems without items allows anything after */
        items = any_item = cJSON_CreateTrue();
        if (!items) return sift__js_coom(c);
    }
    const char *r = visit_array_items(c, s, name, rule_name, items, prefix, mn, mx);
    cJSON_Delete(any_item);
    return r;
}

static const char *visit_array_items(conv *c, const cJSON *s, const char *name, const char *rule_name, const cJSON *items,
                                     const cJSON *prefix, long mn, long mx)
{
    if (!sift__js_use_builtin(c, "space")) return NULL;
    sift__gbnf_sbuf b = {0};
    sift__gbnf_sb_puts(&b, "\"[\" space ");
    if (prefix) {
        if (!cJSON_IsArray(prefix)) return sift__gbnf_sb_free(&b), sift__js_cfail(c, SIFT_E_INVAL, "'prefixItems' must be an array");
        long np = cJSON_GetArraySize(prefix);
        const char **tr = sift__gx_calloc((size_t)np + 1, sizeof *tr);
        if (!tr) return sift__gbnf_sb_free(&b), sift__js_coom(c);
        long k = 0;
        size_t o = sift__js_path_push(c, "prefixItems");
        for (const cJSON *it = prefix->child; it && c->status == SIFT_OK; it = it->next, k++) {
            char idx[32];
            snprintf(idx, sizeof idx, "%ld", k);
            size_t o2 = sift__js_path_push(c, idx);
            char tn[48];
            snprintf(tn, sizeof tn, "tuple-%ld", k);
            char *nm = sift__js_join_name(name, tn);
            tr[k] = nm ? sift__js_visit(c, it, nm, NULL) : sift__js_coom(c);
            sift__gx_free(nm);
            sift__js_path_pop(c, o2);
            if (!tr[k] && c->unsat) { /* no value fits item k: the array ends before it */
                c->status = SIFT_OK;
                c->unsat = false;
                if (c->err) *c->err = (sift_error){0};
                if (mn > k) {
                    c->unsat = true;
                    sift__js_cfail(c, SIFT_E_INVAL, "prefixItems: item %ld matches nothing but minItems needs it", k);
                }
                np = k;
                mx = k;
                break;
            }
        }
        sift__js_path_pop(c, o);
        bool more = items && !cJSON_IsFalse(items) && (mx < 0 || mx > np);
        const char *more_rule = NULL;
        if (c->status == SIFT_OK && more) {
            size_t o3 = sift__js_path_push(c, "items");
            char *nm = sift__js_join_name(name, "item");
            more_rule = nm ? sift__js_visit(c, items, nm, NULL) : sift__js_coom(c);
            sift__gx_free(nm);
            sift__js_path_pop(c, o3);
        }
        if (c->status != SIFT_OK) {
            sift__gx_free(tr);
            sift__gbnf_sb_free(&b);
            return NULL;
        }
        /* required prefix: the first min(np, minItems) items, a tuple may end early (JSON
         * Schema); llama.cpp's conventions require the whole tuple when minItems is absent */
        long need = (c->flags & SIFT_JSON_SCHEMA_LLAMA) && !cJSON_GetObjectItemCaseSensitive(s, "minItems") ? np : (mn < np ? mn : np);
        if (mx >= 0 && mx < np) np = mx;
        if (need > np) need = np;
        for (k = 0; k < need; k++) sift__gbnf_sb_printf(&b, "%s%s", k ? " \",\" space " : "", tr[k]);
        /* optional tail of the tuple, then the extra items */
        long opened = 0;
        for (k = need; k < np; k++, opened++) sift__gbnf_sb_printf(&b, " (%s%s", k ? "\",\" space " : "", tr[k]);
        if (more_rule) {
            long extra_min = mn > np ? mn - np : 0;
            long extra_max = mx >= 0 ? mx - np : -1;
            sift__gbnf_sbuf one = {0};
            if (np > 0) sift__gbnf_sb_printf(&one, "(\",\" space %s)", more_rule);
            else sift__gbnf_sb_printf(&one, "%s", more_rule);
            if (np > 0) {
                sift__gbnf_sb_puts(&b, " ");
                sift__gbnf_put_repetition(&b, one.s ? one.s : "", extra_min, extra_max, NULL);
            } else {
                sift__gbnf_sb_puts(&b, " ");
                sift__gbnf_put_repetition(&b, more_rule, extra_min, extra_max, "\",\" space");
            }
            sift__gbnf_sb_free(&one);
        }
        for (k = 0; k < opened; k++) sift__gbnf_sb_puts(&b, ")?");
        sift__gx_free(tr);
    } else {
        const char *item_rule;
        if (items && !cJSON_IsTrue(items)) {
            if (cJSON_IsFalse(items)) {
                if (mn > 0) return sift__gbnf_sb_free(&b), (c->unsat = c->status == SIFT_OK, sift__js_cfail(c, SIFT_E_INVAL, "items: false with minItems > 0 matches nothing"));
                mx = 0;
                item_rule = "value";
            } else {
                size_t o = sift__js_path_push(c, "items");
                char *nm = sift__js_join_name(name, "item");
                item_rule = nm ? sift__js_visit(c, items, nm, NULL) : sift__js_coom(c);
                sift__gx_free(nm);
                sift__js_path_pop(c, o);
            }
        } else {
            item_rule = sift__js_use_builtin(c, "value");
        }
        if (!item_rule) return sift__gbnf_sb_free(&b), (const char *)NULL;
        sift__gbnf_put_repetition(&b, item_rule, mn, mx, "\",\" space");
    }
    sift__gbnf_sb_puts(&b, " \"]\" space");
    return sift__js_add_rule(c, rule_name, sift__gbnf_sb_take(&b));
}
