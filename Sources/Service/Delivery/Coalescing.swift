import Foundation
import Store

/// A type's batching rule (`coalesce` under the app's `types`): notifications of
/// this type for one user's device and one entity, within `windowSeconds` of the
/// first, are sent once, when the window closes.
public struct CoalesceRule: Sendable {
    public var windowSeconds: Int
    /// The alert body of a window's send that carries two or more: e.g.
    /// "{count} updates on {entity_title}". Without one, the latest alert as it was.
    public var summary: SummaryTemplate?
}

/// A summary text with `{field}` places, checked at start-up against `fields`.
/// `{{` and `}}` are literal braces.
public struct SummaryTemplate: Sendable {
    /// count: the notifications the send carries; title, body: the latest alert's;
    /// the rest: the latest notification's own fields.
    static let fields = ["count", "type", "entity_type", "entity_id", "entity_title", "title", "body"]

    enum Part: Sendable, Equatable {
        case text(String)
        case field(String)
    }
    let parts: [Part]
    let source: String

    /// The template, or why the text is not one of known fields.
    static func parse(_ text: String) -> Result<SummaryTemplate, Invalid> {
        var parts: [Part] = []
        var literal = ""
        var i = text.startIndex
        while i < text.endIndex {
            let c = text[i]
            let next = text.index(after: i)
            if c == "{" || c == "}", next < text.endIndex, text[next] == c {
                literal.append(c)
                i = text.index(after: next)
                continue
            }
            if c == "}" { return .failure(Invalid("a '}' without its '{' (write }} for a brace)")) }
            if c == "{" {
                guard let close = text[next...].firstIndex(of: "}") else { return .failure(Invalid("a '{' without its '}'")) }
                let name = String(text[next..<close])
                guard fields.contains(name) else {
                    let known = fields.map { "{\($0)}" }.joined(separator: ", ")
                    return .failure(Invalid("unknown field {\(name)} (known: \(known))"))
                }
                if !literal.isEmpty { parts.append(.text(literal)); literal = "" }
                parts.append(.field(name))
                i = text.index(after: close)
                continue
            }
            literal.append(c)
            i = next
        }
        if !literal.isEmpty { parts.append(.text(literal)) }
        return .success(SummaryTemplate(parts: parts, source: text))
    }

    /// A field with no value (no entity title given) renders as empty text.
    func render(_ values: [String: String]) -> String {
        parts.map { part in
            switch part {
            case .text(let t): t
            case .field(let f): values[f] ?? ""
            }
        }.joined()
    }
}

enum Coalescing {
    /// The window's key among one device's windows: type and entity.
    static func key(type: String, entityID: String?) -> String {
        type + "\u{1F}" + (entityID ?? "")
    }

    /// The carrier's apns-collapse-id, "user|type|entity": the device keeps one
    /// notification per window key. APNs takes 64 bytes at most; a longer one is
    /// replaced by a digest of the same three (128 bits of FNV-1a, hex).
    static func collapseID(user: String, type: String, entityID: String?) -> String {
        let plain = "\(user)|\(type)|\(entityID ?? "")"
        if plain.utf8.count <= 64 { return plain }
        func fnv(_ seed: UInt64) -> UInt64 {
            var h = seed
            for b in plain.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
            return h
        }
        let hex = { (v: UInt64) in String(v, radix: 16).leftPadded(to: 16) }
        return "h:" + hex(fnv(0xcbf2_9ce4_8422_2325)) + hex(fnv(0x8422_2325_cbf2_9ce4))
    }

    /// A carrier's payload with the summary as its alert body (the title stays the
    /// latest's). Nil when the payload is not a JSON object (the service wrote it:
    /// not expected), and the caller sends it as it is.
    static func summarize(_ payload: [UInt8], count: Int, template: SummaryTemplate) -> [UInt8]? {
        guard case .object(var members)? = try? JSON.parse(payload),
              let apsIndex = members.firstIndex(where: { $0.0 == "aps" }),
              case .object(var aps) = members[apsIndex].1
        else { return nil }
        let alertIndex = aps.firstIndex { $0.0 == "alert" }
        var alert: [(String, JSON)] = []
        if let alertIndex {
            switch aps[alertIndex].1 {
            case .object(let m): alert = m
            case .string(let s): alert = [("body", .string(s))]
            default: break
            }
        }
        var values: [String: String] = ["count": String(count)]
        for (key, value) in members {
            if let s = value.stringValue, ["type", "entity_type", "entity_id", "entity_title"].contains(key) { values[key] = s }
        }
        for (key, value) in alert where key == "title" || key == "body" { values[key] = value.stringValue }
        let body = JSON.string(template.render(values))
        if let i = alert.firstIndex(where: { $0.0 == "body" }) { alert[i].1 = body } else { alert.append(("body", body)) }
        if let alertIndex { aps[alertIndex].1 = .object(alert) } else { aps.insert(("alert", .object(alert)), at: 0) }
        members[apsIndex].1 = .object(aps)
        return JSON.object(members).bytes
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
