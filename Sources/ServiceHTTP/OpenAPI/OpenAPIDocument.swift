import ServiceCore

/// apns-server's API as an OpenAPI 3.1 document, served at `GET /openapi.json`
/// (no credential) for apps' and backends' client generators, and read by the
/// property-based API tests (schemathesis, scripts/api-test.sh).
///
/// It is kept in step with the router by `OpenAPITests`: a route the application
/// registers that is missing here fails it, and so does a path here that no route
/// serves. To add a route: add its path item under "paths" (the method, `operationId`,
/// `security`: `apiKey` for `/v1`, `userJWT` for `/api/user`, the parameters, the
/// request body and the statuses it answers, errors by `#/components/responses/…`),
/// reusing the schemas under "components".
///
/// The errors every operation of a kind answers are not written out: `served` adds
/// them (`impliedErrors`). Write only an operation's own (404, 409, 422, 503 …).
///
/// The document is openapi.json beside this file, compiled in as text
/// (`EmbeddedAssets.openapiJSON`, no resource bundle); its constraints say what the
/// server enforces, no more: a request the document forbids must be refused with a 4xx.
enum OpenAPIDocument {
    /// openapi.json as written.
    static var text: String { EmbeddedAssets.openapiJSON }

    /// The document as served: compact, with `AppType` listing the apps this
    /// server's config names, so that a generated client (and the tests) know them.
    static func served(appTypes: [String]) -> [UInt8] {
        let appType: JSON = .object([
            ("type", .string("string")),
            ("enum", .array(appTypes.map(JSON.string))),
            ("description", .string("An app this server's config names (`apps[].app_type`).")),
        ])
        return withErrors.replacing(["components", "schemas", "AppType"], with: appType).bytes
    }

    /// `text` parsed, with the implied errors: the same for every server, so made once.
    private static let withErrors: JSON = {
        guard let document = try? JSON.parse(Array(text.utf8)) else {
            preconditionFailure("OpenAPIDocument.text is not JSON")
        }
        return withImpliedErrors(document)
    }()

    /// The errors an operation answers because of its kind, whatever it does: 401
    /// to a missing or wrong credential, where one is needed (a `security` that is
    /// not empty), and 400, 408 and 413 to a body that is not what the operation
    /// takes, comes too slowly or is too large, where it takes one.
    static func impliedErrors(_ operation: JSON) -> [(status: String, response: String)] {
        var errors: [(String, String)] = []
        if case .array(let requirements)? = operation["security"], !requirements.isEmpty {
            errors.append(("401", "Unauthorized"))
            // An API key's role or apps may not cover the operation.
            if requirements.contains(where: { $0["apiKey"] != nil }) { errors.append(("403", "Forbidden")) }
        }
        if operation["requestBody"] != nil {
            errors += [("400", "BadRequest"), ("408", "Timeout"), ("413", "TooLarge")]
        }
        return errors
    }

    /// `document` with each operation's implied errors among its responses, in
    /// the order of their statuses.
    static func withImpliedErrors(_ document: JSON) -> JSON {
        guard case .object(let paths)? = document["paths"] else { return document }
        let methods: Set<String> = ["get", "put", "post", "delete", "patch"]
        let completed = paths.map { path, item -> (String, JSON) in
            guard case .object(let members) = item else { return (path, item) }
            return (path, .object(members.map { method, operation in
                guard methods.contains(method), case .object(var responses)? = operation["responses"] else {
                    return (method, operation)
                }
                for error in impliedErrors(operation) where !responses.contains(where: { $0.0 == error.status }) {
                    responses.append((error.status, .object([("$ref", .string("#/components/responses/\(error.response)"))])))
                }
                responses.sort { $0.0 < $1.0 }
                return (method, operation.replacing(["responses"], with: .object(responses)))
            }))
        }
        return document.replacing(["paths"], with: .object(completed))
    }
}

extension JSON {
    /// This value with the member at `path` (object keys) replaced, or added.
    func replacing(_ path: ArraySlice<String>, with value: JSON) -> JSON {
        guard let key = path.first else { return value }
        guard case .object(var members) = self else { return self }
        if let i = members.firstIndex(where: { $0.0 == key }) {
            members[i].1 = members[i].1.replacing(path.dropFirst(), with: value)
        } else {
            members.append((key, JSON.object([]).replacing(path.dropFirst(), with: value)))
        }
        return .object(members)
    }

    func replacing(_ path: [String], with value: JSON) -> JSON { replacing(path[...], with: value) }
}
