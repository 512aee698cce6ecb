/* The names before issue #40's one-prefix rename (parity_lp_, parity_st_, parity_ar_) still
 * compile and do what the new ones do, through include/parity/deprecated.h. Built with
 * -Wno-deprecated-declarations (CTest deprecated_names); check_warnings.sh (CTest
 * deprecated_names_warn) compiles it again and checks that the compiler warns at the uses, naming
 * the new function and type, and that PARITY_NO_DEPRECATED removes the old names.
 * Exit 0 when every check passes. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "parity/logprob.h"
#include "parity/logprob_rl.h"
#include "parity/reduce.h"
#include "parity/safetensors.h"

static int fails = 0;
#define CHECK(c)                                                                                  \
    do {                                                                                          \
        if (!(c)) {                                                                               \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                          \
            fails++;                                                                              \
        }                                                                                         \
    } while (0)

int main(void)
{
    /* safetensors: one F32 tensor x = [1.5, -2] in a buffer, read with the old names. */
    static const char hdr[] = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    unsigned char buf[8 + sizeof hdr - 1 + 8];
    uint64_t hlen = sizeof hdr - 1;
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(buf + 8, hdr, hlen);
    float vals[2] = {1.5f, -2.0f};
    memcpy(buf + 8 + hlen, vals, sizeof vals);

    parity_st_file_t *f = NULL;
    parity_diag_t diag;
    CHECK(parity_st_open_mem(buf, sizeof buf, "old_names", &f, &diag) == PARITY_OK);
    if (f) {
        CHECK(parity_st_count(f) == 1);
        const parity_st_tensor_t *t = parity_st_find(f, "x");
        CHECK(t != NULL);
        if (t) {
            CHECK(t->dtype == PARITY_ST_F32 && t->ndim == 1 && t->shape[0] == 2);
            double d[2] = {0, 0};
            CHECK(parity_st_read_f64(f, t, 0, 2, d) == PARITY_OK);
            CHECK(d[0] == 1.5 && d[1] == -2.0);
        }
        parity_st_close(f);
    }
    parity_st_dtype_t dt;
    CHECK(parity_st_dtype_from_name("BF16", &dt) == PARITY_OK && dt == PARITY_ST_BF16);
    CHECK(strcmp(parity_st_dtype_name(PARITY_ST_I16), "I16") == 0);
    CHECK(parity_st_dtype_size(PARITY_ST_F64) == 8 && PARITY_ST_MAX_DIMS == PARITY_SAFETENSORS_MAX_DIMS);

    /* The old name is the new function: same address (one symbol, through the asm label). */
    CHECK(parity_st_close == parity_safetensors_close);
    CHECK(parity_lp_open == parity_logprob_open);

    /* logprob and logprob_rl. */
    parity_lp_format_t fmt = PARITY_LP_AUTO;
    CHECK(parity_lp_format_from_name("vllm", &fmt) == PARITY_OK && fmt == PARITY_LP_VLLM);
    CHECK(strcmp(parity_lp_format_name(PARITY_LP_JSONL), "jsonl") == 0);
    CHECK(PARITY_LP_PRESENT == PARITY_LOGPROB_PRESENT && PARITY_LP_SIDE_B == PARITY_LOGPROB_SIDE_B);
    parity_lp_cmp_opts_t co = parity_lp_cmp_default_opts();
    CHECK(co.worst_tokens == parity_logprob_cmp_default_opts().worst_tokens);
    parity_lp_seq_t seq;
    parity_lp_seq_init(&seq);
    parity_lp_seq_free(&seq);
    parity_lp_rl_opts_t ro = parity_lp_rl_default_opts();
    CHECK(ro.clip_eps == 0.2 && ro.tis_cap == 2.0);
    unsigned allow = 0;
    CHECK(parity_lp_allow_from_names("positive", &allow) == PARITY_OK && allow == PARITY_LP_ALLOW_POSITIVE);

    /* reduce: the old type and constant names with the (unchanged) function names. */
    parity_ar_spec_t s;
    CHECK(parity_reduce_spec_parse("ring:8:bf16", &s, &diag) == PARITY_OK);
    CHECK(s.algo == PARITY_AR_RING && s.ranks == 8 && s.hop == PARITY_AR_BF16);
    parity_ar_dtype_t hop = PARITY_AR_BF16;
    CHECK(parity_reduce_round(hop, 1.0 + 1.0 / 512) == 1.0);
    parity_ar_workload_t w;
    CHECK(parity_reduce_workload_parse("normal", &w) == PARITY_OK && w == PARITY_AR_W_NORMAL);
    CHECK(PARITY_AR_MAX_RANKS == PARITY_REDUCE_MAX_RANKS);

    if (fails) {
        fprintf(stderr, "deprecated_names: %d checks failed\n", fails);
        return 1;
    }
    printf("deprecated_names: the old names work\n");
    return 0;
}
