import Foundation

/// `api_keys_file`: one key a line, `#` comments. A line is either
///
///     NAME  ROLE  APPS  KEY      e.g.  billing-worker  send  staff,customer  3f9a…
///
/// (ROLE: read, support, send or admin; APPS: `*` or app types separated by commas),
/// or a bare `KEY`: the format before names, which stays an `admin` key for every
/// app, named `key-` and a short keyed hash of the secret (never the secret itself).
package enum APIKeyFile {
    /// A key as read: what it may do, and its secret (compared in constant time by `Auth`).
    package struct Entry: Sendable {
        package let key: APIKey
        package let secret: [UInt8]
    }

    static func read(_ path: String, apps configured: [String]) throws(ConfigError) -> [Entry] {
        let text: String
        switch ServerConfig.contents(of: path) {
        case .success(let bytes): text = String(decoding: bytes, as: UTF8.self)
        case .failure(let why): throw ConfigError("api_keys_file: cannot read \(path): \(why.message)")
        }
        var entries: [Entry] = []
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces.union(.init(charactersIn: "\r")))
            if line.isEmpty || line.hasPrefix("#") { continue }
            // Never quote the key itself: only where it is and what is wrong.
            let at = "api_keys_file: line \(n + 1) of \(path)"
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            let entry: Entry
            switch fields.count {
            case 1:
                let secret = try Self.secret(fields[0], at)
                let tag = HMACSHA256.hex(HMACSHA256.mac(key: Array("apns-server key name".utf8), secret)).prefix(8)
                entry = Entry(key: APIKey(name: "key-\(tag)", role: .admin, apps: nil, named: false), secret: secret)
            case 4:
                let name = fields[0]
                guard (1...64).contains(name.utf8.count),
                      name.utf8.allSatisfy({ $0 < 0x80 && (isalnum(Int32($0)) != 0 || "._-".utf8.contains($0)) }) else {
                    throw ConfigError("\(at): the name must be 1 to 64 letters, digits, '.', '_' or '-'")
                }
                guard let role = APIKey.Role(rawValue: fields[1]) else {
                    throw ConfigError("\(at): the role must be read, support, send or admin, not '\(fields[1])'")
                }
                var apps: Set<String>?
                if fields[2] != "*" {
                    let listed = fields[2].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                    for app in listed where !configured.contains(app) {
                        throw ConfigError("\(at): unknown app '\(app)'; configured: \(configured.joined(separator: ", ")), or * for all")
                    }
                    apps = Set(listed)
                }
                entry = Entry(key: APIKey(name: name, role: role, apps: apps, named: true),
                              secret: try Self.secret(fields[3], at))
            default:
                throw ConfigError("\(at): expected NAME ROLE APPS KEY (or a bare key), not \(fields.count) fields")
            }
            guard !entries.contains(where: { $0.key.name == entry.key.name }) else {
                throw ConfigError("\(at): the name '\(entry.key.name)' is given to two keys")
            }
            guard !entries.contains(where: { $0.secret == entry.secret }) else {
                throw ConfigError("\(at): the same key is listed twice")
            }
            entries.append(entry)
        }
        guard !entries.isEmpty else { throw ConfigError("api_keys_file: \(path) has no key (one key a line)") }
        return entries
    }

    private static func secret(_ field: String, _ at: String) throws(ConfigError) -> [UInt8] {
        guard field.utf8.count >= 16, field.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw ConfigError("\(at) is not a key (16 or more printable characters, no spaces)")
        }
        return Array(field.utf8)
    }
}
