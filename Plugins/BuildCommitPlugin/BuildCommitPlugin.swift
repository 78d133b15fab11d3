import Foundation
import PackagePlugin

/// Runs scripts/build-info.sh before every build of the `BuildCommit` target, so a
/// plain `swift build` in a git checkout knows its commit (make and dist builds too:
/// there is no other step to forget).
@main
struct BuildCommitPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let script = context.package.directoryURL.appending(path: "scripts/build-info.sh")
        return [.prebuildCommand(displayName: "Read the build's git commit", executable: URL(fileURLWithPath: "/bin/sh"),
                                 arguments: [script.path, output.path], outputFilesDirectory: output)]
    }
}
