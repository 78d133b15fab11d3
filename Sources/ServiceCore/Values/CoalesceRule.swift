import Foundation

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
    package func render(_ values: [String: String]) -> String {
        parts.map { part in
            switch part {
            case .text(let t): t
            case .field(let f): values[f] ?? ""
            }
        }.joined()
    }
}
