import GRDB

/// Copies the write-ahead log back into the database file from a connection of its
/// own, beside the writer rather than between two of its transactions.
///
/// SQLite's default checkpoints on the committing connection once the log passes
/// 1,000 pages (4 MB). A 100k fan-out writes tens of MB of log (its deliveries,
/// then their finishes), so the writer stopped ~20 times for a copy and two fsyncs,
/// and every delivery waiting for it waited too. A PASSIVE checkpoint takes no write
/// lock: it runs while the writer writes, and copies what no reader still needs.
/// The writer keeps a far bound of its own (`writerPages`) should this one fall behind.
final class Checkpointer: Sendable {
    /// The log's size at which the writer checkpoints after all (64 MB).
    static let writerPages = 16_384
    private let task: Task<Void, Never>

    init(path: String, every interval: Duration = .milliseconds(200)) throws {
        var config = Configuration()
        config.label = "apns-store-checkpoint"
        let connection = try DatabaseQueue(path: path, configuration: config)
        task = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                // Busy (another checkpoint) or failing: the next round, or the writer's bound.
                _ = try? await connection.writeWithoutTransaction { try $0.checkpoint(.passive) }
            }
        }
    }

    deinit { task.cancel() }
}
