import CServiceCrypto

/// The signature a receiver checks, in Stripe's shape: the header
/// `APNs-Server-Signature: t=<UNIX seconds>,v1=<hex HMAC-SHA256>`, the HMAC keyed
/// with the receiver's secret over `"<t>.<body>"`. The timestamp is signed too, so
/// that a receiver can refuse an old request replayed (Stripe's tolerance is five
/// minutes); each attempt is signed anew with its own time.
enum WebhookSignature {
    static let header = "APNs-Server-Signature"

    static func value(secret: [UInt8], timestamp: Int64, body: [UInt8]) -> String {
        "t=\(timestamp),v1=\(hex(hmac(secret: secret, Array("\(timestamp).".utf8) + body)))"
    }

    static func hmac(secret: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let status = secret.withUnsafeBufferPointer { key in
            data.withUnsafeBufferPointer { bytes in
                out.withUnsafeMutableBufferPointer { mac in
                    cservice_hmac_sha256(key.baseAddress, key.count, bytes.baseAddress, bytes.count, mac.baseAddress)
                }
            }
        }
        precondition(status == 0, "HMAC-SHA256 failed (out of memory)")
        return out
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
