/* version.c — the linked library's version (clpa_base.h). */
#include "clpa_base.h"

unsigned clpa_version_number(void) { return CLPA_VERSION_NUMBER; }

const char *clpa_version_string(void) {
#define CLPA_STR2(x) #x
#define CLPA_STR(x) CLPA_STR2(x)
  return CLPA_STR(CLPA_VERSION_MAJOR) "." CLPA_STR(CLPA_VERSION_MINOR) "." CLPA_STR(
      CLPA_VERSION_PATCH);
}
