import BuildCommit
import CBuildInfo

/// The release (`apns-server/VERSION` in a webhook's User-Agent).
public let apnsServerVersion = String(cString: apns_build_version())

/// What `--version` prints: the release and the commit it was built from.
public let apnsServerVersionLine = "\(apnsServerVersion) (commit \(buildCommit))"
