import Hummingbird
import ServiceDelivery
import Store

/// An answer other than success, in the seed's shape: `{"success":false,"error":"…"}`.
struct APIError: Error, Sendable {
    let status: HTTPResponse.Status
    let message: String

    static func badRequest(_ message: String) -> APIError { APIError(status: .badRequest, message: message) }
    static func unauthorized(_ message: String) -> APIError { APIError(status: .unauthorized, message: message) }
    static func notFound(_ message: String) -> APIError { APIError(status: .notFound, message: message) }
    static func conflict(_ message: String) -> APIError { APIError(status: .conflict, message: message) }
    static func tooLarge(_ limit: Int) -> APIError {
        APIError(status: .contentTooLarge, message: "request body is larger than \(limit) bytes")
    }

    var response: Response {
        JSONResponse.make(status, .object([("success", .bool(false)), ("error", .string(message))]))
    }
}

/// It renders itself wherever it is thrown, in the seed's shape.
extension APIError: HTTPResponseError {
    func response(from request: Request, context: some RequestContext) throws -> Response { response }
}

extension APIError {
    /// Delivery's refusal, as HTTP says it.
    init(_ refusal: RequestError) {
        switch refusal {
        case .invalid(let message): self = .badRequest(message)
        case .conflict(let message): self = .conflict(message)
        }
    }
}

/// Delivery's refusals render as `APIError`s do, wherever they are thrown.
extension RequestError: HTTPResponseError {
    package var status: HTTPResponse.Status { APIError(self).status }
    package func response(from request: Request, context: some RequestContext) throws -> Response { APIError(self).response }
}

/// Every error becomes the seed's error shape, Hummingbird's own ones too (an
/// unknown route is a 404 with `{"success":false,…}`, not a bare status), and an
/// unexpected one is a 500 that says nothing of its cause to the caller.
package struct ErrorMiddleware: RouterMiddleware {
    package typealias Context = ServiceContext
    /// A 503's Retry-After: about the time a busy SQLite writer or a restarting
    /// PostgreSQL takes to come back.
    static let retryAfterSeconds = 2

    package func handle(_ request: Request, context: Context,
                next: (Request, Context) async throws -> Response) async throws -> Response {
        // U+0000 reaches a URL only percent-encoded. No id or name holds one, and
        // PostgreSQL refuses it in any text (a 500): refused here, for every route.
        if request.uri.description.range(of: "%00", options: .caseInsensitive) != nil {
            return APIError.badRequest("the URL has a U+0000 (%00)").response
        }
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return error.response
        } catch let error as RequestError {
            return APIError(error).response
        } catch let error as StoreError where error.isTemporary {
            // Busy, not broken: a client (or its HTTP library) that honours Retry-After
            // comes back, where a 500 would say the request itself is at fault.
            context.logger.warning("request deferred", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            var response = APIError(status: .serviceUnavailable, message: "the database is busy; try again shortly").response
            response.headers[.retryAfter] = String(Self.retryAfterSeconds)
            return response
        } catch let error as any HTTPResponseError {
            let message: String = switch error.status {
            case .notFound: "not found"
            case .methodNotAllowed: "method not allowed"
            case .contentTooLarge: "request body is too large"
            case .unauthorized: "unauthorized"
            default: error.status.reasonPhrase.lowercased()
            }
            return APIError(status: error.status.code >= 500 ? .internalServerError : error.status, message: message).response
        } catch {
            context.logger.error("request failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"])
            return APIError(status: .internalServerError, message: "internal error").response
        }
    }
}

