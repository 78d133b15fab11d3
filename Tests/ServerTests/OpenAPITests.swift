import Foundation
import Testing
import TestSupport
@testable import Service
@testable import ServiceHTTP

/// `GET /openapi.json` describes exactly what the application serves: every route
/// its router registers is in the document (method and path), and every operation
/// in the document is a route. The document's own validity, and the server's
/// agreement with its schemas, are scripts/api-test.sh's (openapi-spec-validator,
/// then schemathesis on the live binary).
@Suite struct OpenAPITests {
    static let methods = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]

    /// "METHOD /path/{parameter}" for every operation of a document.
    static func operations(_ document: [String: Any]) throws -> Set<String> {
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        var out = Set<String>()
        for (path, item) in paths {
            for method in methods where item[method] != nil { out.insert("\(method.uppercased()) \(path)") }
        }
        return out
    }

    @Test func documentListsEveryRouteAndNoOther() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let routes = Set(server.routes)
        #expect(routes.count > 20, "the application's routes were read: \(routes.sorted())")

        let r = await server.request("GET", "/openapi.json")
        #expect(r.status == 200)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(r.body.utf8)) as? [String: Any])
        let documented = try Self.operations(document)
        #expect(routes.subtracting(documented).sorted() == [], "served but not in OpenAPIDocument")
        #expect(documented.subtracting(routes).sorted() == [], "in OpenAPIDocument but not served")
    }

    /// No credential needed; JSON; OpenAPI 3.1; `AppType` names the configured apps.
    @Test func servedWithoutCredentialsNamingTheConfiguredApps() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let r = await server.request("GET", "/openapi.json")
        #expect(r.status == 200)
        #expect(r.headers.contains { $0.0.lowercased() == "content-type" && $0.1.hasPrefix("application/json") })
        let document = try #require(try JSONSerialization.jsonObject(with: Data(r.body.utf8)) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let schemas = (document["components"] as? [String: Any])?["schemas"] as? [String: Any]
        let appType = schemas?["AppType"] as? [String: Any]
        #expect(appType?["enum"] as? [String] == ["staff", "customer"])
    }

    /// Every `$ref` in the document as served names something it has, and every
    /// operation has an id, a security requirement and the errors of its kind: a
    /// 401 where it needs a credential, 400, 408 and 413 where it takes a body.
    @Test func referencesResolveAndOperationsAreComplete() throws {
        let served = Data(OpenAPIDocument.served(appTypes: ["staff"]))
        let document = try #require(try JSONSerialization.jsonObject(with: served) as? [String: Any])
        var refs: [String] = []
        func walk(_ value: Any) {
            if let object = value as? [String: Any] {
                if let ref = object["$ref"] as? String { refs.append(ref) }
                object.values.forEach(walk)
            } else if let array = value as? [Any] {
                array.forEach(walk)
            }
        }
        walk(document)
        for ref in refs {
            #expect(ref.hasPrefix("#/"), "\(ref)")
            var node: Any? = document
            for part in ref.dropFirst(2).split(separator: "/") {
                node = (node as? [String: Any])?[part.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")]
            }
            #expect(node != nil, "unresolved \(ref)")
        }
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        var ids = Set<String>()
        for (path, item) in paths {
            for method in Self.methods {
                guard let operation = item[method] as? [String: Any] else { continue }
                let id = operation["operationId"] as? String
                #expect(id != nil, "\(method) \(path) has an operationId")
                if let id { #expect(ids.insert(id).inserted, "operationId \(id) is unique") }
                let security = try #require(operation["security"] as? [[String: Any]], "\(method) \(path) says its security")
                let responses = try #require(operation["responses"] as? [String: Any])
                if !security.isEmpty {
                    #expect(responses["401"] != nil, "\(method) \(path) documents its 401")
                }
                if operation["requestBody"] != nil {
                    for status in ["400", "408", "413"] {
                        #expect(responses[status] != nil, "\(method) \(path) documents its \(status)")
                    }
                }
            }
        }
    }
}
