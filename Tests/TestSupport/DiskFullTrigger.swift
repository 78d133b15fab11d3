/// A full disk, played by a trigger: inserting the row of `table` whose `column`
/// holds `value` fails with the error the engine gives when its disk is full, and
/// no other insert does. For tests that a write is all or nothing.
public enum DiskFullTrigger {
    public enum Engine: Sendable { case sqlite, postgres }

    /// The statements that set it, in order.
    public static func create(_ engine: Engine, table: String, column: String, value: String) -> [String] {
        switch engine {
        case .sqlite:
            return ["""
                CREATE TRIGGER disk_full BEFORE INSERT ON \(table) WHEN NEW.\(column) = '\(value)'
                BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END
                """]
        case .postgres:
            return ["""
                CREATE OR REPLACE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'; END $$
                """, """
                CREATE TRIGGER disk_full BEFORE INSERT ON \(table) FOR EACH ROW
                WHEN (NEW.\(column) = '\(value)') EXECUTE FUNCTION disk_full()
                """]
        }
    }

    /// The statement that frees the disk again.
    public static func drop(_ engine: Engine, table: String) -> String {
        engine == .sqlite ? "DROP TRIGGER disk_full" : "DROP TRIGGER disk_full ON \(table)"
    }
}
