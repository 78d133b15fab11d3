#include "build_info.h"

#define APNS_VERSION "0.9.0"

const char *apns_build_version(void) { return APNS_VERSION; }
