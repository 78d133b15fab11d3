#ifndef APNS_BUILD_INFO_H
#define APNS_BUILD_INFO_H

/// The release this build is (the one place the version is written).
const char *apns_build_version(void);

/// The git commit the build was made from: a short hash, "-dirty" when tracked files
/// differed from it, or "unknown" where the tree was not a git checkout.
const char *apns_build_commit(void);

#endif
