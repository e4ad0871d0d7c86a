package moto

import (
	"encoding/json"
	"testing"
)

// ECSClient mends moto 5.2.1's task answers: the numeric cpu, memory and
// memoryReservation of a task and of its containers become the strings the
// ECS API sends, in RunTask's "tasks" and StopTask's "task" alike; other
// fields and a body that is not JSON pass unchanged.
func TestECSClient_NumericTaskSizesBecomeStrings(t *testing.T) {
	in := `{"tasks":[{"cpu":256,"memory":"512","taskArn":"a","containers":[{"name":"runner","cpu":0,"memory":512,"memoryReservation":128,"exitCode":0}]}],"task":{"cpu":1024,"containers":[{"cpu":0}]}}`
	var got struct {
		Tasks []struct {
			CPU, Memory, TaskArn string
			Containers           []struct {
				Name, CPU, Memory, MemoryReservation string
				ExitCode                             int
			}
		}
		Task struct {
			CPU        string
			Containers []struct{ CPU string }
		}
	}
	if err := json.Unmarshal(fixTasks([]byte(in)), &got); err != nil {
		t.Fatalf("mended answer does not decode with string sizes: %v", err)
	}
	tk, c := got.Tasks[0], got.Tasks[0].Containers[0]
	if tk.CPU != "256" || tk.Memory != "512" || tk.TaskArn != "a" || c.Name != "runner" || c.CPU != "0" || c.Memory != "512" || c.MemoryReservation != "128" || c.ExitCode != 0 {
		t.Errorf("tasks[0] = %+v", tk)
	}
	if got.Task.CPU != "1024" || got.Task.Containers[0].CPU != "0" {
		t.Errorf("task = %+v", got.Task)
	}
	if out := fixTasks([]byte("<xml/>")); string(out) != "<xml/>" {
		t.Errorf("non-JSON body = %q", out)
	}
}
