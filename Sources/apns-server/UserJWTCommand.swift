import ArgumentParser
import Foundation
import Service

/// `apns-server user-jwt`: a token for one app user, for trying `/api/user/…` by hand.
struct UserJWTSubcommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user-jwt",
        abstract: "Print an HS256 JWT for an app user, signed with the config's user_jwt_secret_file.",
        discussion: """
            The token carries sub, exp and iat, company_id when --company is given, and aud and iss
            when the config's user_jwt names them: what the /api/user/… routes accept.
            Usage: apns-server user-jwt --config FILE.yaml --user ID [--company ID] [--ttl SECONDS]
            Exit 0: the token on stdout; 2: one line on stderr saying what is wrong.
            """)

    /// `--config` is the root command's option: ArgumentParser gives a name the parent
    /// declares to the parent, wherever it stands on the line.
    @ParentCommand var server: APNsServerCommand

    @Option(help: ArgumentHelp("The user id (the token's sub).", valueName: "ID"))
    var user: String

    @Option(help: ArgumentHelp("The user's company (the token's company_id).", valueName: "ID"))
    var company: String?

    @Option(help: ArgumentHelp("Seconds until the token expires (1 to 86400).", valueName: "SECONDS"))
    var ttl = UserJWTCommand.defaultTTL

    func run() async throws {
        guard let config = server.config else {
            FileHandle.standardError.write(Data("apns-server user-jwt: --config FILE.yaml is required\n".utf8))
            throw ExitCode(2)
        }
        switch UserJWTCommand.token(configPath: config, user: user, company: company, ttl: ttl,
                                    environment: ProcessInfo.processInfo.environment,
                                    now: Int64(Date().timeIntervalSince1970)) {
        case .success(let token): print(token)
        case .failure(let error):
            FileHandle.standardError.write(Data("apns-server user-jwt: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
    }
}
