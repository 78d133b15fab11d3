import Foundation
import PackagePlugin

/// Runs scripts/embed-assets.sh before every build of the `ServiceHTTP` target: the console's
/// page, script and style and the OpenAPI document are files of their own (excluded from
/// the target's sources in Package.swift), compiled in as `EmbeddedAssets`.
@main
struct EmbedAssetsPlugin: BuildToolPlugin {
    /// The files, relative to the target's folder, in the order they are embedded.
    static let assets = ["Console/console.html", "Console/console.js", "Console/console.css",
                         "OpenAPI/openapi.json"]

    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let script = context.package.directoryURL.appending(path: "scripts/embed-assets.sh")
        // The target's folder by the layout's rule (Target.directoryURL needs tools 6.1).
        let folder = context.package.directoryURL.appending(path: "Sources/\(target.name)")
        let files = Self.assets.map { folder.appending(path: $0).path }
        return [.prebuildCommand(displayName: "Embed the service's console and OpenAPI document",
                                 executable: URL(fileURLWithPath: "/bin/sh"),
                                 arguments: [script.path, output.path] + files, outputFilesDirectory: output)]
    }
}
