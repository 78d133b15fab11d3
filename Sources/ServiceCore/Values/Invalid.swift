/// Why a value (a preference, a template) was refused: the sentence the 400 or the
/// start-up error line says.
package struct Invalid: Error {
    package let why: String
    package init(_ why: String) { self.why = why }
}
