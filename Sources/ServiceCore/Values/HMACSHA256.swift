import CServiceCrypto

/// HMAC-SHA256 (the core's OpenSSL), for every MAC the service computes: API key
/// comparison, JWT signatures, idempotency fingerprints and webhook signatures.
package enum HMACSHA256 {
    package static func mac(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let rc = key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in
                out.withUnsafeMutableBufferPointer { o in
                    cservice_hmac_sha256(k.baseAddress, k.count, d.baseAddress, d.count, o.baseAddress)
                }
            }
        }
        precondition(rc == 0, "HMAC-SHA256 failed (out of memory)")
        return out
    }

    /// Lowercase hex, two digits a byte.
    package static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
