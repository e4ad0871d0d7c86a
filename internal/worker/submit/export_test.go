package submit

// ToolVerdict is toolVerdict, for tests outside the package.
var ToolVerdict = toolVerdict
