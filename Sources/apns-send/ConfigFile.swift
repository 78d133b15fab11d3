/// A settings file in the format of keys.example: `KEY=value` lines, `#` comments,
/// values optionally in single or double quotes. Unknown keys are errors, so a
/// misspelt key does not silently fall back to the environment.
struct ConfigFile {
    static let keys: Set<String> = ["APNS_KEY_PATH", "APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPIC", "APNS_ENV",
                                    "APNS_CERTIFICATE_PATH", "APNS_CERTIFICATE_PASSWORD_FILE",
                                    "APNS_PROXY"]

    let values: [String: String]

    init(path: String) throws(UsageError) {
        let bytes: [UInt8]
        do { bytes = try readSmallFile(path) } catch { throw UsageError(path, error.reason) }
        var values: [String: String] = [:]
        for (index, raw) in String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = raw.trimmed
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("export ") { line = line.dropFirst(7).trimmed }
            guard let eq = line.firstIndex(of: "=") else {
                throw UsageError("\(path):\(index + 1)", "expected KEY=value")
            }
            let key = String(line[..<eq].trimmed)
            guard ConfigFile.keys.contains(key) else {
                throw UsageError("\(path):\(index + 1)",
                                 "unknown key \(key) (known: \(ConfigFile.keys.sorted().joined(separator: ", ")))")
            }
            values[key] = ConfigFile.unquoted(line[line.index(after: eq)...].trimmed)
        }
        // A relative key path is relative to the file's folder, not the working directory.
        for key in ["APNS_KEY_PATH", "APNS_CERTIFICATE_PATH", "APNS_CERTIFICATE_PASSWORD_FILE"] {
            if let keyPath = values[key], !keyPath.isEmpty, !keyPath.hasPrefix("/") {
                let folder = path.lastIndex(of: "/").map { String(path[...$0]) } ?? ""
                values[key] = folder + keyPath
            }
        }
        self.values = values
    }

    subscript(key: String) -> String? { values[key] }

    private static func unquoted(_ value: Substring) -> String {
        for quote in ["\"", "'"] where value.count >= 2 && value.hasPrefix(quote) && value.hasSuffix(quote) {
            return String(value.dropFirst().dropLast())
        }
        return String(value)
    }
}

extension StringProtocol {
    var trimmed: Substring {
        var s = self[...]
        while let c = s.first, c == " " || c == "\t" || c == "\r" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" || c == "\r" { s = s.dropLast() }
        return Substring(s)
    }
}
