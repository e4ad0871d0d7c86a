package moto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ECSClient is the SDK HTTP client (aws.HTTPClient) for ECS calls to moto:
// set it as an aws.Config's HTTPClient.
// It works around a moto 5.2.1 bug: a task's cpu and memory (and its
// containers' cpu, memory and memoryReservation) come back from RunTask,
// DescribeTasks and StopTask as JSON numbers (every container gets
// "cpu": 0), where the ECS API has strings, and the Go SDK refuses the
// whole answer ("deserialization failed, expected string, got 0"). The
// numbers are turned into strings, as AWS sends them. The zero value is
// ready.
type ECSClient struct {
	// RunTask, when set, is given the body of every RunTask request before
	// it is sent (tests that check what was asked for record it here).
	RunTask func(body []byte)
}

// Do sends req with http.DefaultClient, handing a RunTask body to
// c.RunTask and mending moto's task answers (see ECSClient).
func (c *ECSClient) Do(req *http.Request) (*http.Response, error) {
	target := req.Header.Get("X-Amz-Target")
	if c.RunTask != nil && strings.HasSuffix(target, ".RunTask") && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		c.RunTask(b)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK ||
		!(strings.HasSuffix(target, ".RunTask") || strings.HasSuffix(target, ".DescribeTasks") || strings.HasSuffix(target, ".StopTask")) {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	b = fixTasks(b)
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// fixTasks turns the numeric cpu, memory and memoryReservation of the
// tasks in an ECS answer ("tasks" or "task") and of their containers into
// strings; a body that is not a JSON object is returned as it is.
func fixTasks(body []byte) []byte {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	var tasks []any
	if list, ok := doc["tasks"].([]any); ok {
		tasks = list
	}
	if task, ok := doc["task"].(map[string]any); ok {
		tasks = append(tasks, task)
	}
	stringify := func(m map[string]any) {
		for _, k := range []string{"cpu", "memory", "memoryReservation"} {
			if n, ok := m[k].(float64); ok {
				m[k] = fmt.Sprint(n)
			}
		}
	}
	for _, tk := range tasks {
		tm, _ := tk.(map[string]any)
		stringify(tm)
		containers, _ := tm["containers"].([]any)
		for _, ct := range containers {
			cm, _ := ct.(map[string]any)
			stringify(cm)
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}
