import ArgumentParser
import FoundationEssentials

/// The small languages of the command line: durations, rates, key specs, token files.
extension MockCommand {
    /// Without the spaces and tabs around it.
    static func trimmed<S: StringProtocol>(_ text: S) -> String {
        let isBlank = { (c: Character) in c == " " || c == "\t" }
        guard let first = text.firstIndex(where: { !isBlank($0) }), let last = text.lastIndex(where: { !isBlank($0) }) else {
            return ""
        }
        return String(text[first...last])
    }

    /// "50ms", "1.5s", "2m", "1h", "500us"; a bare number is milliseconds.
    static func duration(_ text: String, _ flag: String) throws -> Duration {
        let units: [(String, Double)] = [("us", 1e-6), ("ms", 1e-3), ("s", 1), ("m", 60), ("h", 3600)]
        let t = trimmed(text)
        for (suffix, scale) in units where t.hasSuffix(suffix) {
            if let v = Double(t.dropLast(suffix.count)), v >= 0 {
                return .microseconds(Int64((v * scale * 1e6).rounded()))
            }
        }
        if let ms = Double(t), ms >= 0 { return .microseconds(Int64(ms * 1000)) }
        throw ValidationError("\(flag): cannot read \"\(text)\" as a duration (e.g. 50ms, 2s, 20m)")
    }

    /// "429=0.01,503=0.005,500=0.001"
    static func parseRates(_ text: String) throws -> [Int: Double] {
        var rates: [Int: Double] = [:]
        for item in text.split(separator: ",") {
            let kv = item.split(separator: "=")
            guard kv.count == 2, let code = Int(kv[0]), [429, 500, 503].contains(code),
                  let rate = Double(kv[1]), (0...1).contains(rate) else {
                throw ValidationError("--fail: \"\(item)\" is not STATUS=FRACTION with STATUS 429, 500 or 503")
            }
            rates[code] = rate
        }
        guard rates.values.reduce(0, +) <= 1 else { throw ValidationError("--fail: fractions add up past 1") }
        return rates
    }

    /// "KEYID=path" or a path named AuthKey_KEYID.p8.
    static func parseAuthKey(_ spec: String) throws -> (String, String) {
        if let eq = spec.firstIndex(of: "="), !spec[..<eq].contains("/") {
            return (String(spec[..<eq]), String(spec[spec.index(after: eq)...]))
        }
        let name = URL(fileURLWithPath: spec).deletingPathExtension().lastPathComponent
        guard name.hasPrefix("AuthKey_"), name.count > "AuthKey_".count else {
            throw ValidationError("--auth-key: \(spec) is neither KEYID=PATH nor named AuthKey_KEYID.p8")
        }
        return (String(name.dropFirst("AuthKey_".count)), spec)
    }

    /// "KEYID=VALUE", both sides non-empty, for the per-key flags.
    static func keyValue(_ spec: String, _ flag: String, _ form: String) throws -> (String, String) {
        guard let eq = spec.firstIndex(of: "="), eq != spec.startIndex, eq != spec.index(before: spec.endIndex) else {
            throw ValidationError("\(flag) wants \(form), got \(spec)")
        }
        return (String(spec[..<eq]), String(spec[spec.index(after: eq)...]))
    }

    /// One token per line, optional ",timestamp_ms"; blank lines and # comments skipped.
    static func readUnregistered(_ path: String) throws -> [String: Int64] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ValidationError("--unregistered: cannot read \(path)")
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var tokens: [String: Int64] = [:]
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = trimmed(raw)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let parts = line.split(separator: ",").map { trimmed($0) }
            guard let ts = parts.count > 1 ? Int64(parts[1]) : now else {
                throw ValidationError("--unregistered: bad timestamp in \"\(line)\"")
            }
            tokens[parts[0].lowercased()] = ts
        }
        return tokens
    }
}
