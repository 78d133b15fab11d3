import Hummingbird
import Logging
import ServiceCore
import ServiceDelivery
import Store
import Synchronization

/// What the audit log records of one request, filled in as the request is handled:
/// who (the middleware that accepted the key or the user's token), for which app
/// and what it created (the route, once it knows).
final class AuditNote: Sendable {
    private struct Fields {
        var actor: String?
        var app: String?
        var target: String?
    }
    private let fields = Mutex(Fields())

    var actor: String? {
        get { fields.withLock { $0.actor } }
        set { fields.withLock { $0.actor = newValue } }
    }
    var app: String? {
        get { fields.withLock { $0.app } }
        set { fields.withLock { $0.app = newValue } }
    }
    var target: String? {
        get { fields.withLock { $0.target } }
        set { fields.withLock { $0.target = newValue } }
    }
}

/// Records every call that creates, cancels or changes something (any method but
/// GET and HEAD on the backend API, and the apps' token and preference changes),
/// once its answer is known and before it is sent: a client that saw the answer
/// finds the entry, whatever dies afterwards. A refused call (403, 409, 400) is
/// recorded with its status; a call with no valid credential (401) names no one and
/// is not. Receipts and opens are the devices' reports, not changes: not recorded.
package struct AuditMiddleware: RouterMiddleware {
    package typealias Context = ServiceContext
    let store: any DeliveryStore
    let clock: any ServiceClock

    package func handle(_ request: Request, context: Context,
                next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Self.audits(request) else { return try await next(request, context) }
        let status: Int
        do {
            let response = try await next(request, context)
            status = Int(response.status.code)
            await record(request, context, status: status)
            return response
        } catch let error as APIError {
            await record(request, context, status: Int(error.status.code))
            throw error
        } catch let error as RequestError {
            await record(request, context, status: Int(APIError(error).status.code))
            throw error
        } catch {
            await record(request, context, status: 500)
            throw error
        }
    }

    static func audits(_ request: Request) -> Bool {
        guard request.method != .get, request.method != .head else { return false }
        let path = request.uri.path
        return path.hasPrefix("/v1/") || (path.hasPrefix("/api/user/") && path != "/api/user/notification-events")
    }

    private func record(_ request: Request, _ context: Context, status: Int) async {
        guard let actor = context.audit.actor else { return }
        let entry = AuditEntry(at: clock.nowMillis, actor: actor, method: request.method.rawValue,
                               path: request.uri.path, appType: context.audit.app, target: context.audit.target,
                               status: status, remoteAddress: context.remoteAddress)
        do {
            try await store.appendAudit(entry)
        } catch {
            // The work is done and its answer stands: a 500 now would invite a retry
            // that does it twice. The log line says what the audit log lacks.
            context.logger.error("audit entry not recorded", metadata: [
                "actor": "\(actor)", "method": "\(entry.method)", "path": "\(entry.path)", "status": "\(status)",
                "error": "\(error)"])
        }
    }
}
