package core

import (
	"encoding/json"
	"sync"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/report"
)

// The supervisor layer's turns (docs/contracts.md § The supervisor, § What the
// supervisor layer does) run through the ordinary worker path — a runner and an
// engine per attempt, so they run the same way on AWS — as attempts of synthetic
// steps of kind report.Kind. Such a step is no flow node: its Node is
// SupervisorNode (which no node id can equal), its StepRef "supervisor#<n>". Its
// submit records the output and never completes a task token of its own: a
// finalize turn completes the publish step it runs for, an observation completes
// nothing.

// SupervisorNode is the Node of every supervisor turn's step. It is not a
// valid node id (those start with a letter or digit), so it never shares a
// visit count or a task id with a flow node.
const SupervisorNode = "_supervisor"

// SupervisorKind is the Kind of a supervisor turn's step (report.Kind).
const SupervisorKind = report.Kind

// Event types of the supervisor layer's turns (Service.OnEvent). They are
// not step events: a supervisor turn is no flow step.
const (
	EventSupervisorStarted = "supervisor_started"
	EventSupervisorEnded   = "supervisor_ended"
)

// SupervisorState is the layer's in-flight work within one Service.
type SupervisorState struct {
	Timeline sync.Mutex     // serializes this process's timeline appends (audit.go)
	Launches sync.WaitGroup // observation launches in flight
	Warned   sync.Map       // role files already warned about
}

// Drain waits until no observation turn is being launched (by this
// process: a goroutine, or a message of a local queue). An embedded
// run calls it once its execution ended, before it stops the workers, so no
// worker is launched after that.
func (s *Service) Drain() {
	s.Supervisor.Launches.Wait()
	if q, ok := s.Queue.(interface{ Drain() }); ok {
		q.Drain() // queue/local: the messages of this process
	}
}

// ReportEnv is what the report reads of a run's environment.
func ReportEnv(env *RunEnv) report.Env {
	if env == nil {
		return report.Env{}
	}
	re := report.Env{Flow: env.Flow, Config: env.Config}
	if env.Task != nil {
		re.Front = env.Task.Front
	}
	return re
}

// SupervisorValue decodes the value of a supervisor turn's step (its job,
// the step it observes or finalizes, its outcome); a value that does not decode gives
// the zero SupervisorValue.
func SupervisorValue(st stratus.Step) report.SupervisorValue {
	var v report.SupervisorValue
	json.Unmarshal(st.Value, &v)
	return v
}
