import ArgumentParser
import Service

/// `apns-server store …`: commands on a database rather than a running service.
struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store", abstract: "Commands on the service's database.", subcommands: [StoreCopySubcommand.self])
}

/// `apns-server store copy`: a SQLite database into PostgreSQL, to grow past one instance.
struct StoreCopySubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Copy a SQLite database into an empty PostgreSQL database, every table row for row.",
        discussion: """
            Stop apns-server first: a source another process is writing to is refused, and the copy holds
            the source's write lock until it ends. Progress and, at the end, both sides' counts per table
            go to stderr. A copy that stopped part-way resumes when run again from the same, unchanged
            source; where a re-run cannot get further, the message says what to do instead.
            The password, when the URL has none: the first line of --password-file FILE, else the
            PGPASSWORD environment variable (a password in the URL is visible to every user in ps).
            Exit 0: every table's counts match; 1: they do not, or the copy stopped on the way;
            2: bad input, nothing written.
            """)

    @Option(help: ArgumentHelp("The SQLite database to copy.", valueName: "sqlite:PATH"))
    var from: String

    @Option(help: ArgumentHelp("The PostgreSQL database to fill.", valueName: "postgres://USER[:PASSWORD]@HOST[:PORT]/DB"))
    var to: String

    @Option(help: ArgumentHelp("A file whose first line is the database password, for a URL without one (else PGPASSWORD).",
                               valueName: "FILE"))
    var passwordFile: String?

    @Flag(help: "Copy into a database that already has rows (rows with the same keys are overwritten).")
    var intoNonEmpty = false

    @Option(help: ArgumentHelp("Rows per transaction.", valueName: "ROWS"))
    var batch = 5_000

    func run() async throws {
        let status = await StoreCopyCommand.copy(from: from, to: to, passwordFile: passwordFile, intoNonEmpty: intoNonEmpty,
                                                 batchSize: batch)
        if status != 0 { throw ExitCode(status) }
    }
}
