package devstack

// BootstrapZip is bootstrapZip, for the tests' expected code hashes.
var BootstrapZip = bootstrapZip

// LocalArtifacts is localArtifacts, for the lint of the transformed template.
var LocalArtifacts = localArtifacts
