/// Why the client could not do what was asked at all (a token's own failure is a
/// `DeliveryResult`, never an error).
public enum APNsError: Error, Equatable, CustomStringConvertible {
    /// The transport could not be set up (bad CA file, out of memory, ...).
    case transport(String)
    /// The provider token could not be signed.
    case signing(String)
    /// `shutdown()` was called.
    case shutDown

    /// One line saying what failed.
    public var description: String {

        switch self {
        case .transport(let why): "cannot start the HTTP/2 transport: \(why)"
        case .signing(let why): why
        case .shutDown: "the APNs client is shut down"
        }
    }
}
