/// The signature a receiver checks, in Stripe's shape: the header
/// `APNs-Server-Signature: t=<UNIX seconds>,v1=<hex HMAC-SHA256>`, the HMAC keyed
/// with the receiver's secret over `"<t>.<body>"`. The timestamp is signed too, so
/// that a receiver can refuse an old request replayed (Stripe's tolerance is five
/// minutes); each attempt is signed anew with its own time.
package enum WebhookSignature {
    package static let header = "APNs-Server-Signature"

    package static func value(secret: [UInt8], timestamp: Int64, body: [UInt8]) -> String {
        "t=\(timestamp),v1=\(HMACSHA256.hex(HMACSHA256.mac(key: secret, Array("\(timestamp).".utf8) + body)))"
    }
}
