/* One public header named alone, first: whichever it is, it brings goro.h
 * and every goro/ header in goro.h's order. `make test-strict` compiles
 * this file once per header (GORO_ALONE), as C11 and as C++17, by gcc and
 * by clang, with -pedantic -Wall -Wextra -Werror. It touches something of
 * each header; the C++ spawn forms (goro/cxx.h) need goro/structured.h's
 * groups declared before them. */
#include GORO_ALONE

static int one(int a) { return a; }

int main(void)
{
    goro_t *h = go(one, 1);                         /* goro.h */
    long r = 0;
    int err = goro_join(h, &r);
    goro_group_t *g = NULL;                         /* goro/structured.h */
    if (goro_group_new(&g, NULL) == 0) {
        err |= goro_group_go(g, one, 2);            /* goro/cxx.h in C++ */
        err |= goro_group_wait(g, NULL, NULL);
        err |= goro_group_free(g);
    }
    goro_pipeline_t *p = NULL;                      /* goro/pipeline.h */
    if (goro_pipeline_new(&p, NULL) == 0)
        err |= goro_pipeline_free(p);
    goro_stall_stats_t st;                          /* goro/debug.h */
    err |= goro_stall_stats(&st);
    err |= goro_process_pid(NULL) != -1;            /* goro/process.h */
    return err != 0 || r != 1;
}
