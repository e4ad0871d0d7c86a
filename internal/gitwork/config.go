package gitwork

import (
	"fmt"
	"strconv"
)

// FixedConfig is the git configuration every git that makes or moves a
// commit of Stratus's runs with (workspace's commits, publish's commit
// and push), so that the operator's hooks, signing, line-ending
// conversion, background maintenance and fsmonitor cannot change or slow
// what a command does. Each pair is a key and its value.
func FixedConfig() [][2]string {
	return [][2]string{
		{"core.autocrlf", "false"},
		{"core.hooksPath", "/dev/null"},
		{"core.fsmonitor", "false"},
		{"commit.gpgSign", "false"},
		{"gc.auto", "0"},
		{"maintenance.auto", "false"},
		{"advice.addEmbeddedRepo", "false"},
		{"advice.detachedHead", "false"},
	}
}

// ConfigEnv is git configuration as environment (NAME=value) for Run's
// env: GIT_CONFIG_COUNT with GIT_CONFIG_KEY_<n> and GIT_CONFIG_VALUE_<n>
// (git ≥ 2.31), which git reads like `-c key=value` but which, unlike
// `-c`, never appears in the process's argv. A key given twice is
// multi-valued, in order; an empty value of a list such as
// credential.helper resets the list. Only one ConfigEnv may be in one
// env: pass every pair in one call.
func ConfigEnv(pairs ...[2]string) []string {
	env := []string{"GIT_CONFIG_COUNT=" + strconv.Itoa(len(pairs))}
	for i, kv := range pairs {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	return env
}
