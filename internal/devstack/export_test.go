package devstack

// BootstrapZip is bootstrapZip, for the tests' expected code hashes.
var BootstrapZip = bootstrapZip
