/// The git commit the build was made from: a short hash, "-dirty" when tracked files
/// differed from it, or "unknown" where the tree was not a git checkout (a source
/// archive). `generatedBuildCommit` is written before each build by
/// scripts/build-info.sh, which the `BuildCommitPlugin` runs.
public let buildCommit = generatedBuildCommit
