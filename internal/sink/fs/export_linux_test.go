package fs

// SetExchange replaces the entry exchange of replace for a test; the
// returned func puts the real one back.
func SetExchange(f func(dirfd int, old, new string) error) (restore func()) {
	real := exchange
	exchange = f
	return func() { exchange = real }
}

// Exchange is the real entry exchange.
var Exchange = exchange
