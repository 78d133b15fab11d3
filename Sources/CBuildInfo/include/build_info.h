#ifndef APNS_BUILD_INFO_H
#define APNS_BUILD_INFO_H

/// The release this build is (the one place the version is written). The commit is
/// the BuildCommit target's.
const char *apns_build_version(void);

#endif
