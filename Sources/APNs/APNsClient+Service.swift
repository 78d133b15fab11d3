import ServiceLifecycle

/// A Hummingbird or Vapor app runs the client in its `ServiceGroup`: on SIGTERM
/// the group shuts services down in reverse order, so list the client before the
/// HTTP server. The server stops taking requests first; then the client drains
/// (every request in flight gets its answer, retries included) and closes its
/// connections.
extension APNsClient: Service {
    /// Waits for the group's graceful shutdown (or for cancellation), then shuts the
    /// client down: every request in flight gets its answer before the connections close.
    /// Never throws.
    public func run() async throws {

        // Cancellation (the group ending without a graceful shutdown) drains too.
        try? await gracefulShutdown()
        await shutdown()
    }
}
