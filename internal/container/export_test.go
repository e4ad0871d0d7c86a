package container

// ConnectWith is connect for the tests: the sockets to try and the PATH
// lookup given.
var ConnectWith = connect
