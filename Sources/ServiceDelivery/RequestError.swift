/// Why delivery's policy refuses a request, in its own words: what is wrong with the
/// request itself. HTTP says it with a status (`APIError`); a scheduled send that is
/// refused at its time records the message.
package enum RequestError: Error, Sendable {
    /// The request cannot be carried out as written (a 400).
    case invalid(String)
    /// It conflicts with what is stored (a 409).
    case conflict(String)

    /// The sentence the caller reads.
    package var message: String {
        switch self {
        case .invalid(let message), .conflict(let message): message
        }
    }
}
