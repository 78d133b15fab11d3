import BuildCommit
import CBuildInfo

/// What `--version` prints: the release and the git commit it was built from.
let buildVersionLine = "\(String(cString: apns_build_version())) (commit \(buildCommit))"
