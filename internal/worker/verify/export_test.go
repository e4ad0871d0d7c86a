package verify

// ReworksSpent is reworksSpent, for tests outside the package.
var ReworksSpent = reworksSpent
