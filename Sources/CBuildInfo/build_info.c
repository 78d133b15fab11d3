#include "build_info.h"

#define APNS_VERSION "0.9.0"

// scripts/build-info.sh writes build_commit.h (git-ignored) from `git rev-parse` before
// a build; a tree without it (a source archive, a checkout built by plain `swift build`)
// still builds and says "unknown".
#if __has_include("build_commit.h")
#include "build_commit.h"
#endif
#ifndef APNS_BUILD_COMMIT
#define APNS_BUILD_COMMIT "unknown"
#endif

const char *apns_build_version(void) { return APNS_VERSION; }

const char *apns_build_commit(void) { return APNS_BUILD_COMMIT; }
