import Foundation
import Hummingbird
import ServiceDelivery

/// Path parameters as the client meant them. Hummingbird hands a segment over still
/// percent-encoded, so without decoding `/v1/users/a%20b/…` would name the user "a%20b"
/// while a body naming "a b" names another, and an escaped control character would pass
/// the checks made on the text. Every route reads its path parameters here.
extension ServiceContext {
    /// The decoded segment; one that does not decode to UTF-8 (a stray `%`, an escaped
    /// byte sequence that is not a character) is a 400.
    func pathParameter(_ name: String) throws(APIError) -> String {
        guard let decoded = (parameters.get(name) ?? "").removingPercentEncoding else {
            throw .badRequest("\(name) in the path is not percent-encoded UTF-8")
        }
        return decoded
    }

    /// `{user_id}`: an identifier, as a user id is in a body.
    func pathUserID() throws(APIError) -> String {
        let id = try pathParameter("user_id")
        guard Registration.isIdentifier(id) else { throw .badRequest("user id must be 1 to 256 characters") }
        return id
    }
}
