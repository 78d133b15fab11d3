import Foundation
import ServiceCore
import Store

package enum Coalescing {
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
    package static func summarize(_ payload: [UInt8], count: Int, template: SummaryTemplate) -> [UInt8]? {
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
