/*
 * check.c — see check.h. Each request runs through its own incremental
 * reference session (reference.h), fed its prompt and then, one at a
 * time, the tokens the engine generated (teacher forcing on the engine's
 * output, so that one tie cannot send the two down different paths).
 */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "reference.h"

int demo_check(const demo_model *m, const demo_engine *e, double tol, char *verdict, size_t cap) {
  const demo_config *cfg = demo_model_config(m);
  const demo_host_weights *w = demo_model_host(m);
  int32_t count;
  const demo_result *res = demo_engine_results(e, &count);
  double *ref = malloc(sizeof(double) * (size_t)cfg->vocab);
  if (!ref) {
    snprintf(verdict, cap, "FAILED: out of memory");
    return 0;
  }
  int32_t requests = 0, tokens = 0, ties = 0;
  double worst = 0; /* largest logit difference, relative to the position's scale */
  int32_t worst_req = -1, worst_pos = -1;
  int good = 1;
  for (int32_t i = 0; i < count && good; i++) {
    const demo_result *r = &res[i];
    if (!r->req || r->refused || r->num_generated == 0) continue;
    if (!r->logits) {
      snprintf(verdict, cap, "FAILED: request %d kept no logits (the engine ran without them)", i);
      good = 0;
      break;
    }
    demo_ref_session *s = demo_ref_session_create(cfg, w);
    if (!s) {
      snprintf(verdict, cap, "FAILED: out of memory");
      good = 0;
      break;
    }
    requests++;
    for (int32_t k = 0; k < r->num_generated && good; k++) {
      /* The logits that chose generated[k]: after the prompt, then after
       * each generated token before it. */
      const int rc = k == 0 ? demo_ref_session_append(s, r->req->prompt, r->req->prompt_len, ref)
                            : demo_ref_session_append(s, &r->generated[k - 1], 1, ref);
      if (rc != 0) {
        snprintf(verdict, cap, "FAILED: the reference refused request %d at position %d", i, k);
        good = 0;
        break;
      }
      const float *got = r->logits + (size_t)k * (size_t)cfg->vocab;
      const int32_t best = demo_ref_argmax(ref, cfg->vocab), tok = r->generated[k];
      double scale = 1, diff = 0;
      for (int32_t v = 0; v < cfg->vocab; v++) scale = fmax(scale, fabs(ref[v]));
      for (int32_t v = 0; v < cfg->vocab; v++) { /* a NaN fails (fmax would drop it) */
        const double d = fabs((double)got[v] - ref[v]);
        diff = isnan(d) ? INFINITY : fmax(diff, d);
      }
      diff /= scale;
      if (diff > worst) worst = diff, worst_req = i, worst_pos = k;
      tokens++;
      if (tok != best) {
        /* A tie within the tolerance is the arithmetic's to break. */
        if (tok >= 0 && tok < cfg->vocab && ref[best] - ref[tok] <= tol * scale) {
          ties++;
        } else {
          snprintf(verdict, cap,
                   "FAILED: request %d, generated token %d: the engine chose %d (reference logit"
                   " %.6g), the reference %d (%.6g)",
                   i, k, tok, tok >= 0 && tok < cfg->vocab ? ref[tok] : NAN, best, ref[best]);
          good = 0;
        }
      }
      if (good && diff > tol) {
        snprintf(verdict, cap,
                 "FAILED: request %d, generated token %d: logits differ by %.3g of their scale"
                 " (tolerance %.3g)", i, k, diff, tol);
        good = 0;
      }
    }
    demo_ref_session_destroy(s);
  }
  free(ref);
  if (good)
    snprintf(verdict, cap,
             "passed: %d requests, %d generated tokens identical to the host reference (%d within"
             " a tie); logits within %.2g of their scale (worst %.3g, request %d token %d)",
             requests, tokens, ties, tol, worst, worst_req, worst_pos);
  return good;
}
