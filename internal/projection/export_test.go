package projection

// EncodeSlow is Encode through the YAML library only (the fast path's
// reference).
var EncodeSlow = encodeSlow
