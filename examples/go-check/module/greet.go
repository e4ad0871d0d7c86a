// Package greet says hello.
package greet

// Hello greets name.
func Hello(name string) string { return "Hello" }
