/* The cJSON tree of a JSONL line, for the shapes read through trees: cJSON's allocations
 * redirected to a per-thread arena dropped whole after each line, and a builder that makes the
 * same tree cJSON's parser would, from the strict scanner (logprob_json_scan.h), falling back
 * to cJSON's parser on whatever it declines; lp_jsonl_tree_check holds the two to the same
 * trees (tests/test_logprob.c and the JSONL fuzz target call it). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "src/logprob/logprob_json_scan.h"
#include "src/logprob/logprob_jsonl_impl.h"

/* cJSON allocates every node and string of a parsed line separately (about fifteen per token of
 * an OpenAI chat line with top-5), and malloc/free were half of the time of those shapes. While
 * a thread parses a line, cJSON's allocations come from that thread's arena instead, and the
 * whole tree is dropped at once by resetting it (jl_arena_reset; no cJSON_Delete walk). Outside
 * a line parse (any other use of cJSON in the process) the hooks are malloc and free; jl_free
 * tells the arena's blocks apart by address. The hooks are installed once, by the first JSONL
 * open (cJSON_InitHooks is process-wide; nothing else in parity sets them). */
typedef struct jl_chunk {
    struct jl_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} jl_chunk_t;

/* A thread's arena and the tree builder's string scratch are freed when it exits (pool workers live until the
 * process ends; a thread started outside the pool does not). */
static pthread_key_t jl_key;
static pthread_once_t jl_key_once = PTHREAD_ONCE_INIT;
static void jl_tls_free(void *unused);
static void jl_key_init(void) { (void)pthread_key_create(&jl_key, jl_tls_free); }
static void jl_tls_register(void)
{
    pthread_once(&jl_key_once, jl_key_init);
    (void)pthread_setspecific(jl_key, (void *)1);
}

static _Thread_local jl_chunk_t *jl_arena; /* newest first */
static _Thread_local int jl_arena_on;

static void *jl_malloc(size_t n)
{
    if (!jl_arena_on) return malloc(n);
    n = (n + 15) & ~(size_t)15;
    jl_chunk_t *c = jl_arena;
    if (!c || c->cap - c->used < n) {
        size_t cap = c ? 2 * c->cap : (size_t)1 << 20;
        while (cap < n) cap *= 2;
        jl_chunk_t *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        if (!c) jl_tls_register();
        nc->next = c;
        nc->cap = cap;
        nc->used = 0;
        jl_arena = c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static void jl_free(void *p)
{
    if (!p) return;
    for (const jl_chunk_t *c = jl_arena; c; c = c->next)
        if ((const unsigned char *)p >= c->data && (const unsigned char *)p < c->data + c->cap) return;
    free(p);
}

static pthread_once_t jl_hooks_once = PTHREAD_ONCE_INIT;
static void jl_hooks_init(void)
{
    cJSON_Hooks h = {jl_malloc, jl_free};
    cJSON_InitHooks(&h);
}

/* After a line: the tree is gone. One chunk is kept (the newest, the largest) unless it grew
 * past 16 MiB, so that a huge line does not pin its memory. */
static void jl_arena_reset(void)
{
    jl_arena_on = 0;
    jl_chunk_t *c = jl_arena;
    if (!c) return;
    for (jl_chunk_t *o = c->next; o;) {
        jl_chunk_t *nx = o->next;
        free(o);
        o = nx;
    }
    c->next = NULL;
    c->used = 0;
    if (c->cap > ((size_t)16 << 20)) {
        free(c);
        jl_arena = NULL;
    }
}

static _Thread_local fc_buf_t tb_buf; /* jl_tree's string scratch */

static void jl_tls_free(void *unused)
{
    (void)unused;
    for (jl_chunk_t *c = jl_arena; c;) {
        jl_chunk_t *nx = c->next;
        free(c);
        c = nx;
    }
    jl_arena = NULL;
    free(tb_buf.b);
    tb_buf.b = NULL;
    tb_buf.cap = 0;
}

/* --- the cJSON tree of a line, built without cJSON's parser ----------------------------------
 * For the shapes read through cJSON trees (completions, vLLM, SGLang, and any line the fast
 * paths leave), cJSON's parser spent most of its time in strtod (and a localeconv() per
 * number): the 16-17 digit numbers engines print went through glibc's multi-precision path.
 * jl_tree builds the same tree (the same node types, values, keys, strings, child/next/prev
 * links and valueint saturation as cJSON 1.7's parse_value) from the arena, with fp_num for the
 * numbers and lp_json_string for the strings and keys, in strict JSON; it returns NULL, and
 * cJSON_ParseWithLength decides, on anything it does not take exactly as cJSON would: a number
 * fp_num declines, an escape lp_json_string leaves to cJSON, blanks other than JSON's four (cJSON
 * skips any byte <= 32), a byte-order mark, nesting deeper than 256, trailing bytes after the
 * value (cJSON ignores them), and every syntax error. lp_jsonl_tree_check compares the two
 * trees (tests/test_logprob.c and the JSONL fuzz target call it). */
static cJSON *tb_new(void)
{
    cJSON *n = jl_malloc(sizeof *n);
    if (n) memset(n, 0, sizeof *n);
    return n;
}

/* the string at c->p, decoded, copied into the arena */
static char *tb_string(fp_cur_t *c)
{
    if (c->p >= c->e || *c->p != '"') return NULL;
    const char *q = c->p + 1;
    while (q < c->e && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
    if (q < c->e && *q == '"') { /* no escape: the bytes themselves */
        size_t n = (size_t)(q - (c->p + 1));
        char *o = jl_malloc(n + 1);
        if (!o) return NULL;
        memcpy(o, c->p + 1, n);
        o[n] = 0;
        c->p = q + 1;
        return o;
    }
    if (!lp_json_string(c, &tb_buf)) return NULL;
    size_t n = strlen(tb_buf.b);
    char *o = jl_malloc(n + 1);
    if (o) memcpy(o, tb_buf.b, n + 1);
    return o;
}

static int tb_value(fp_cur_t *c, cJSON *it, int depth);

/* an array or object at c->p ('[' or '{') into it */
static int tb_container(fp_cur_t *c, cJSON *it, int depth)
{
    char open = *c->p, close = open == '[' ? ']' : '}';
    if (depth > 256) return 0;
    int o = fc_open(c, open, close);
    cJSON *head = NULL, *cur = NULL;
    if (o < 0) return 0;
    if (o == 0)
        for (;;) {
            cJSON *n = tb_new();
            if (!n) return 0;
            if (!head) head = n;
            else {
                cur->next = n;
                n->prev = cur;
            }
            cur = n;
            fp_ws(c);
            if (open == '{') {
                if (!(n->string = tb_string(c))) return 0;
                fp_ws(c);
                if (c->p >= c->e || *c->p++ != ':') return 0;
                fp_ws(c);
            }
            if (!tb_value(c, n, depth)) return 0;
            int nx = fc_next(c, close);
            if (nx < 0) return 0;
            if (nx == 0) break;
        }
    if (head) head->prev = cur;
    it->type = open == '[' ? cJSON_Array : cJSON_Object;
    it->child = head;
    return 1;
}

static int tb_value(fp_cur_t *c, cJSON *it, int depth)
{
    if (c->p >= c->e) return 0;
    char ch = *c->p;
    if (ch == '"') {
        it->type = cJSON_String;
        return (it->valuestring = tb_string(c)) != NULL;
    }
    if (ch == '[' || ch == '{') return tb_container(c, it, depth + 1);
    size_t left = (size_t)(c->e - c->p);
    if (ch == 'n' && left >= 4 && !memcmp(c->p, "null", 4)) {
        it->type = cJSON_NULL;
        c->p += 4;
        return 1;
    }
    if (ch == 't' && left >= 4 && !memcmp(c->p, "true", 4)) {
        it->type = cJSON_True;
        it->valueint = 1;
        c->p += 4;
        return 1;
    }
    if (ch == 'f' && left >= 5 && !memcmp(c->p, "false", 5)) {
        it->type = cJSON_False;
        c->p += 5;
        return 1;
    }
    double v;
    int is_int;
    int64_t iv;
    if (!fp_num(c, &v, &is_int, &iv)) return 0;
    it->type = cJSON_Number;
    it->valuedouble = v;
    it->valueint = v >= INT_MAX ? INT_MAX : v <= (double)INT_MIN ? INT_MIN : (int)v;
    return 1;
}

/* The line's tree (arena memory: jl_arena_on must be set), or NULL: cJSON decides. */
static cJSON *jl_tree(const char *line, size_t len)
{
    fp_cur_t c = {line, line + len};
    cJSON *root = tb_new();
    fp_ws(&c);
    if (!root || !tb_value(&c, root, 0)) return NULL;
    fp_ws(&c);
    return c.p == c.e ? root : NULL;
}

static int tb_same(const cJSON *a, const cJSON *b)
{
    for (; a || b; a = a->next, b = b->next) {
        if (!a || !b || a->type != b->type || a->valueint != b->valueint ||
            memcmp(&a->valuedouble, &b->valuedouble, sizeof a->valuedouble) || !a->string != !b->string ||
            (a->string && strcmp(a->string, b->string)) || !a->valuestring != !b->valuestring ||
            (a->valuestring && strcmp(a->valuestring, b->valuestring)) || !a->child != !b->child)
            return 0;
        if (a->child && (!tb_same(a->child, b->child) || !a->child->prev != !b->child->prev)) return 0;
    }
    return 1;
}

int lp_jsonl_tree_check(const char *line, size_t len)
{
    pthread_once(&jl_hooks_once, jl_hooks_init);
    jl_arena_on = 1;
    cJSON *t = jl_tree(line, len), *ref = t ? cJSON_ParseWithLength(line, len) : NULL;
    int r = !t ? -1 : ref && tb_same(t, ref) ? 0 : 1;
    jl_arena_reset();
    return r;
}

void lp_jsonl_hooks_install(void)
{
    pthread_once(&jl_hooks_once, jl_hooks_init);
}

cJSON *lp_jsonl_tree_parse(const char *line, size_t len)
{
    jl_arena_on = 1;
    cJSON *root = jl_tree(line, len);
    if (!root) root = cJSON_ParseWithLength(line, len);
    jl_arena_on = 0; /* reading the tree allocates nothing; parity's own allocations are malloc's */
    return root;
}

void lp_jsonl_tree_drop(void)
{
    jl_arena_reset();
}
