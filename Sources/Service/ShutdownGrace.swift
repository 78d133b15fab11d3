import Foundation
import Logging
import ServiceLifecycle

/// The deadline of a graceful shutdown. The drain (the HTTP server finishing its
/// requests, the worker getting APNs' answers to what it sent) can wait on others
/// without end: an APNs that accepts requests and never answers, a client that
/// never finishes. `grace` after the signal, whatever is still waited for is given
/// up: `expire` ends the APNs requests in flight unanswered (the worker gives those
/// deliveries back to the outbox, due at once, for the next process) and closes the
/// connections still open; the shutdown then completes and the exit is 0. Should that
/// write-back itself hang (a database that stopped answering), the process exits 0
/// after `writeBack` more; the leases then cover what it held.
///
/// Listed last in the outermost service group, so that it hears the signal first.
struct ShutdownGrace: Service {
    let grace: Duration
    /// Past the grace, this much more for the unanswered to be written back.
    let writeBack: Duration
    let logger: Logger
    let expire: @Sendable () -> Void

    func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            return  // cancelled: the service group ended otherwise
        }
        let (grace, writeBack, logger, expire) = (grace, writeBack, logger, expire)
        // Unstructured: this service is done; the timer outlives it, not the process.
        Task.detached {
            try? await Task.sleep(for: grace)
            logger.warning("shutdown grace expired: unanswered deliveries go back to the outbox",
                           metadata: ["grace_seconds": "\(grace.components.seconds)"])
            expire()
            try? await Task.sleep(for: writeBack)
            logger.error("shutdown did not complete after its grace and write-back; exiting",
                         metadata: ["write_back_seconds": "\(writeBack.components.seconds)"])
            exit(0)
        }
    }
}
