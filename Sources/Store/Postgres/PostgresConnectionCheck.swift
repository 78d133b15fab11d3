import PostgresNIO

extension PostgresStore {
    /// Opens the connection `migrate()` opens, and closes it without a statement:
    /// `apns-server --check-config` learns that the database is there and takes these
    /// credentials, with the one line a start would print when it is not.
    public func checkConnection() async throws(StoreError) {
        let settings = try configuration.connection()
        do {
            let connection = try await PostgresConnection.connect(configuration: settings, id: 0, logger: Self.quiet)
            try? await connection.close()
        } catch {
            throw StoreError(postgres: error, "migrate", configuration)
        }
    }
}
