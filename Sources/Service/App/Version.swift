/// What `apns-server --version` prints.
public let apnsServerVersion = "0.9.0"
