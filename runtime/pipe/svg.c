/*
 * goro_pipeline_svg: a self-contained SVG picture of a pipeline's run -
 * one lane per worker, coloured by the stage it served, over a chart of
 * each stage's queue length. Needs nothing but a browser to look at.
 * The timeline is copied under the lock and drawn without it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pipe/pipe.h"

#define WIDTH 960
#define LEFT 120                     /* labels */
#define RIGHT 20
#define PLOT (WIDTH - LEFT - RIGHT)
#define LANE 16
#define LANE_GAP 4
#define CHART 160

static const char *const colour[] = {
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
};
#define NCOLOUR (sizeof colour / sizeof colour[0])

struct picture {
    char name[PIPE_NAME_MAX];
    int workers, nstages, rule, nseg, nsample;
    bool truncated;
    int64_t t0, t1;
    char (*stage)[PIPE_NAME_MAX];
    struct pipe_segment *seg;
    int64_t *sample_t;
    int32_t *sample_q;
};

static void picture_free(struct picture *pic)
{
    free(pic->stage);
    free(pic->seg);
    free(pic->sample_t);
    free(pic->sample_q);
}

static int copy_out(struct goro_pipeline *p, struct picture *pic)
{
    const struct pipe_timeline *tl = &p->tl;
    if (!p->attr.timeline || p->state == 0 || (!tl->nseg && !tl->nsample))
        return -ENODATA;
    memcpy(pic->name, p->name, sizeof pic->name);
    pic->workers = p->workers;
    pic->nstages = p->nstages;
    pic->rule = p->attr.rule;
    pic->nseg = tl->nseg;
    pic->nsample = tl->nsample;
    pic->truncated = tl->truncated;
    pic->t0 = p->t_start;
    pic->t1 = p->state == 2 ? p->t_end : goro_now();
    size_t S = (size_t)p->nstages;
    pic->stage = malloc(sizeof *pic->stage * S);
    pic->seg = malloc(sizeof *pic->seg * (size_t)(tl->nseg + 1));
    pic->sample_t = malloc(sizeof *pic->sample_t * (size_t)(tl->nsample + 1));
    pic->sample_q = malloc(sizeof *pic->sample_q * S * (size_t)(tl->nsample + 1));
    if (!pic->stage || !pic->seg || !pic->sample_t || !pic->sample_q)
        return -ENOMEM;
    for (size_t s = 0; s < S; s++)
        memcpy(pic->stage[s], p->stage[s].name, PIPE_NAME_MAX);
    memcpy(pic->seg, tl->seg, sizeof *pic->seg * (size_t)tl->nseg);
    memcpy(pic->sample_t, tl->sample_t, sizeof *pic->sample_t * (size_t)tl->nsample);
    memcpy(pic->sample_q, tl->sample_q, sizeof *pic->sample_q * S * (size_t)tl->nsample);
    return 0;
}

/* Stage names are the user's: escaped for XML. */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static double x_of(const struct picture *pic, int64_t t)
{
    double span = (double)(pic->t1 - pic->t0);
    double x = span > 0 ? (double)(t - pic->t0) / span : 0;
    return LEFT + (x < 0 ? 0 : x > 1 ? 1 : x) * PLOT;
}

static void draw_axis(FILE *f, const struct picture *pic, int y)
{
    double span_ms = (double)(pic->t1 - pic->t0) / 1e6;
    double step = 1;
    while (span_ms / step > 10)
        step *= span_ms / step > 50 ? 10 : 2;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", LEFT, y,
            LEFT + PLOT, y);
    for (double ms = 0; ms <= span_ms + 1e-9; ms += step) {
        double x = LEFT + (span_ms > 0 ? ms / span_ms : 0) * PLOT;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g ms</text>\n",
                x, y, x, y + 4, x, y + 16, ms);
    }
}

static void draw(FILE *f, const struct picture *pic)
{
    static const char *const rules[] = { "D'Hondt", "exhaustive", "static" };
    int lanes_top = 50, lanes_h = pic->workers * (LANE + LANE_GAP);
    int chart_top = lanes_top + lanes_h + 40, legend_top = chart_top + CHART + 36;
    int height = legend_top + 20 * ((pic->nstages + 3) / 4) + 10;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n", WIDTH, height);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fputs("<text x=\"10\" y=\"20\" font-size=\"14\">pipeline ", f);
    put_text(f, pic->name[0] ? pic->name : "(unnamed)");
    fprintf(f, ": %d workers, %d stages, %s, %.1f ms%s</text>\n", pic->workers, pic->nstages,
            rules[pic->rule], (double)(pic->t1 - pic->t0) / 1e6,
            pic->truncated ? " (timeline truncated)" : "");
    fprintf(f, "<text x=\"10\" y=\"38\">which stage each worker served</text>\n");
    for (int w = 0; w < pic->workers; w++)
        fprintf(f, "<text x=\"10\" y=\"%d\">worker %d</text>\n",
                lanes_top + w * (LANE + LANE_GAP) + LANE - 4, w);
    for (int i = 0; i < pic->nseg; i++) {
        const struct pipe_segment *s = &pic->seg[i];
        double x0 = x_of(pic, s->t0), x1 = x_of(pic, s->t1);
        fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>\n", x0,
                lanes_top + s->worker * (LANE + LANE_GAP), x1 - x0 < 0.5 ? 0.5 : x1 - x0, LANE,
                colour[s->stage % NCOLOUR]);
    }
    draw_axis(f, pic, lanes_top + lanes_h + 2);

    int32_t qmax = 1;
    for (int i = 0; i < pic->nsample * pic->nstages; i++)
        if (pic->sample_q[i] > qmax)
            qmax = pic->sample_q[i];
    fprintf(f, "<text x=\"10\" y=\"%d\">queue lengths (max %d)</text>\n", chart_top - 6, qmax);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#ccc\"/>\n", LEFT, chart_top, PLOT, CHART);
    for (int s = 0; s < pic->nstages && pic->nsample; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"%s\" points=\"",
                colour[s % NCOLOUR]);
        for (int i = 0; i < pic->nsample; i++)
            fprintf(f, "%.1f,%.1f ", x_of(pic, pic->sample_t[i]),
                    chart_top + CHART - (double)pic->sample_q[i * pic->nstages + s] * CHART / qmax);
        fputs("\"/>\n", f);
    }
    draw_axis(f, pic, chart_top + CHART);

    for (int s = 0; s < pic->nstages; s++) {
        int x = LEFT + (s % 4) * (PLOT / 4), y = legend_top + (s / 4) * 20;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"%d\">", x, y - 10, colour[s % NCOLOUR], x + 16, y);
        put_text(f, pic->stage[s]);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
}

int goro_pipeline_svg(goro_pipeline_t *p, FILE *f)
{
    if (!p || !f)
        return -EINVAL;
    struct picture pic = { 0 };
    goro__pipe_lock(p);
    int r = copy_out(p, &pic);
    goro_mutex_unlock(&p->mu);
    if (r == 0) {
        draw(f, &pic);
        r = fflush(f) != 0 || ferror(f) ? -EIO : 0;
    }
    picture_free(&pic);
    return r;
}
