/*
 * check.h — clpa-demo --check: every finished request again through the
 * plain reference engine on the host (reference.h: dense attention, no
 * paging, no prefix cache, double accumulation), fed the tokens the
 * engine generated. At every generated position the engine's token must
 * be the reference's argmax, or tie with it (a reference logit within the
 * tolerance of the maximum), and every logit must agree within the
 * tolerance (relative to the position's largest reference logit).
 */
#ifndef CLPA_DEMO_CHECK_H
#define CLPA_DEMO_CHECK_H

#include <stddef.h>

#include "model.h"
#include "scheduler.h"

/* Returns 1 when every request passes; verdict gets a one-line summary
 * (the worst position and logit error, or the first failure). */
int demo_check(const demo_model *m, const demo_engine *e, double tol, char *verdict, size_t cap);

#endif
