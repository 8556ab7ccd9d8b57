/* clpa.h — placeholder until the runtime lands in the next commit. */
#ifndef CLPA_H
#define CLPA_H
#include "clpa_base.h"
#endif
