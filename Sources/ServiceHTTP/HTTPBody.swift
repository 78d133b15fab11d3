import Hummingbird
import ServiceCore

enum JSONResponse {
    static let contentType: HTTPFields = [.contentType: "application/json; charset=utf-8"]

    static func make(_ status: HTTPResponse.Status, _ body: JSON) -> Response {
        Response(status: status, headers: contentType, body: .init(byteBuffer: ByteBuffer(bytes: body.bytes)))
    }

    static func ok(_ body: JSON) -> Response { make(.ok, body) }

    static func success(message: String) -> Response {
        ok(.object([("success", .bool(true)), ("message", .string(message))]))
    }
}

/// Reading a JSON body within the size limit and a deadline: a larger one is 413
/// before it is read (Content-Length) or as soon as it passes the limit (chunked);
/// a client that trickles its body is cut off rather than holding a task.
package struct BodyReader: Sendable {
    let limit: Int
    var deadline: Duration = .seconds(10)

    func json(_ request: Request) async throws -> JSON {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw APIError.tooLarge(limit)
        }
        let body = request.body
        let limit = self.limit
        let buffer: ByteBuffer = try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask {
                do {
                    return try await body.collect(upTo: limit)
                } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
                    throw APIError.tooLarge(limit)
                }
            }
            group.addTask { [deadline] in
                try await Task.sleep(for: deadline)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let buffer = first else {
                throw APIError(status: .requestTimeout, message: "request body not received in time")
            }
            return buffer
        }
        guard buffer.readableBytes > 0 else { throw APIError.badRequest("a JSON body is required") }
        do {
            return try JSON.parse(buffer.readableBytesView)
        } catch {
            throw APIError.badRequest(error.description)
        }
    }

    /// A JSON object body, else 400.
    func object(_ request: Request) async throws -> JSON {
        let value = try await json(request)
        guard case .object = value else { throw APIError.badRequest("the body must be a JSON object") }
        return value
    }
}
