/// A widgets push (push type `widgets`, topic `<bundle id>.push-type.widgets`):
/// it tells WidgetKit that the app's widget content changed, so the system
/// reloads the widgets. Its payload is always the same one.
///
/// ```swift
/// let note = try Notification(topic: "com.example.app", pushType: .widgets, payload: WidgetsPush.payload)
/// ```
public enum WidgetsPush {
    /// `{"aps":{"content-changed":true}}`, the one payload a widgets push carries.
    public static let payload = try! Payload(json: #"{"aps":{"content-changed":true}}"#)

    /// Why a payload cannot be a widgets push's.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        /// The payload is not `{"aps":{"content-changed":true}}`.
        case notContentChanged

        /// One line quoting the payload a widgets push carries.
        public var description: String {

            #"a widgets push carries {"aps":{"content-changed":true}} and nothing else"#
        }
    }

    /// Checks a payload written by hand (a file, an API caller) for a widgets push;
    /// white space aside (a `Payload` is compact), it must be exactly `payload`.
    public static func check(_ payload: Payload) throws(WidgetsPush.Error) {
        guard payload == WidgetsPush.payload else { throw .notContentChanged }
    }
}
