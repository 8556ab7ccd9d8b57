/* status.c — clpa_status_name (clpa_base.h): the names come from
 * CLPA_STATUS_MAP, the list the enum is made from. */
#include "clpa_base.h"

const char *clpa_status_name(clpa_status status) {
  switch (status) {
#define CLPA_STATUS_NAME_(name, value) \
  case name:                           \
    return #name;
    CLPA_STATUS_MAP(CLPA_STATUS_NAME_)
#undef CLPA_STATUS_NAME_
  }
  return "CLPA_ERR_UNKNOWN";
}
