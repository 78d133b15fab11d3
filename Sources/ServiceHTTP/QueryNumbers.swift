import Hummingbird
import HummingbirdCore

/// Numbers in a query string, read one way on every route: digits only, as a page's
/// `next` is written (`Int()` would also read "+5" and "-0", which the API's document
/// forbids), and a 400 naming the parameter and its range otherwise.
enum QueryNumbers {
    static func digits(_ text: Substring) -> Int64? {
        text.allSatisfy({ $0.isASCII && $0.isNumber }) ? Int64(String(text)) : nil
    }

    /// `name` as an integer in `range`; `fallback` when the query has none.
    static func integer(_ query: FlatDictionary<Substring, Substring>, _ name: Substring, in range: ClosedRange<Int>,
                        default fallback: Int) throws(APIError) -> Int {
        guard let text = query[name] else { return fallback }
        guard let n = digits(text).map(Int.init), range.contains(n) else {
            throw .badRequest("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    /// An `after` that no page's `next` could have been.
    static let badCursor = APIError.badRequest("after must be the 'next' of a previous page")
}
