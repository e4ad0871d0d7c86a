//go:build !slim

// The in-process --target aws tests need the AWS code: not in the slim build.

package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/stratusflow/stratus"
)

// costFigures are what one run asks of AWS, measured on moto by the end
// to end test: the inputs of the per-run cost estimate. Request counts are
// SDK operations (one per call, retries not counted), by who made them: the
// dispatch function, the worker API function, the CLI (`stratus run --target
// aws`: freeze, start, follow and finish; its follow polls every
// --poll-interval, 200 ms here, 2 s by default, so its reads scale with the
// run's length: one SFN.DescribeExecution per poll round).
type costFigures struct {
	Flow      string `json:"flow"`
	RunID     string `json:"run_id"`
	Steps     string `json:"steps"`
	RunWallMS int64  `json:"run_wall_ms"` // `stratus run` start to end, on moto with local workers

	StepFunctions struct {
		HistoryEvents int `json:"history_events"`
		// StateTransitions counts the states entered: what a Standard
		// workflow is billed per.
		StateTransitions int            `json:"state_transitions"`
		StatesEntered    map[string]int `json:"states_entered_by_type"`
	} `json:"step_functions"`
	// SQSMessages are the dispatch messages the state machine sent: one
	// SendMessage each, one dispatch-function record each.
	SQSMessages int `json:"sqs_messages"`
	Lambda      struct {
		MemoryMB  int           `json:"memory_mb"` // template.yaml Globals MemorySize
		Dispatch  lambdaFigures `json:"dispatch"`
		WorkerAPI lambdaFigures `json:"worker_api"`
	} `json:"lambda"`
	DynamoDB map[string]map[string]int `json:"dynamodb_requests"` // source -> operation -> count
	S3       map[string]map[string]int `json:"s3_requests"`
	Other    map[string]map[string]int `json:"other_requests"` // Step Functions, ECS, Secrets Manager
	Fargate  fargateFigures            `json:"fargate"`
}

// lambdaFigures are one function's invocations: each dispatch message is
// counted as one invocation (the event source batches up to 5), each
// worker API request as one.
type lambdaFigures struct {
	Invocations int            `json:"invocations"`
	WallMS      float64        `json:"wall_ms"`
	GBSeconds   float64        `json:"gb_seconds"` // wall time × memory
	ByWhat      map[string]int `json:"by_what"`    // message kind and node, or method and route
}

// fargateFigures are the workers, each one runner task of the task
// definition's size, timed from its launch to its process's exit.
type fargateFigures struct {
	CPUUnits    int             `json:"cpu_units"`
	MemoryMiB   int             `json:"memory_mib"`
	Tasks       int             `json:"tasks"`
	Workers     []fargateWorker `json:"workers"`
	VCPUSeconds float64         `json:"vcpu_seconds"`
	GBSeconds   float64         `json:"gb_seconds"`
	// Billed*: each task billed for at least one minute (Fargate's minimum).
	BilledVCPUSeconds float64 `json:"billed_vcpu_seconds"`
	BilledGBSeconds   float64 `json:"billed_gb_seconds"`
}

type fargateWorker struct {
	Step        string  `json:"step"` // step ref, or supervisor#N (job)
	WallMS      float64 `json:"wall_ms"`
	VCPUSeconds float64 `json:"vcpu_seconds"`
	GBSeconds   float64 `json:"gb_seconds"`
}

// measure gathers the figures of run once it ended.
func (st *stack) measure(t *testing.T, ctx context.Context, run stratus.Run, f *functions, cliOps map[string]int, stepOf map[string]stratus.Step, runWall time.Duration) *costFigures {
	t.Helper()
	c := &costFigures{Flow: run.Flow, RunID: run.ID, Steps: exampleSteps, RunWallMS: runWall.Milliseconds()}
	c.StepFunctions.StatesEntered = map[string]int{}
	sfnc := awssfn.NewFromConfig(st.cfg)
	var token *string
	for {
		h, err := sfnc.GetExecutionHistory(ctx, &awssfn.GetExecutionHistoryInput{ExecutionArn: aws.String(run.Execution), NextToken: token, MaxResults: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range h.Events {
			c.StepFunctions.HistoryEvents++
			if typ := string(e.Type); strings.HasSuffix(typ, "StateEntered") {
				c.StepFunctions.StateTransitions++
				c.StepFunctions.StatesEntered[strings.TrimSuffix(typ, "StateEntered")]++
			}
		}
		if token = h.NextToken; token == nil {
			break
		}
	}
	if c.StepFunctions.StateTransitions == 0 {
		t.Errorf("the execution's history has no state entered")
	}

	f.mu.Lock()
	inv, reqs, errs := slices.Clone(f.invocations), slices.Clone(f.requests), slices.Clone(f.errs)
	f.mu.Unlock()
	for _, e := range errs {
		t.Errorf("dispatch function: %s", e)
	}
	c.SQSMessages = len(inv)
	c.Lambda.MemoryMB = st.lambdaMB
	c.Lambda.Dispatch = lambdaOf(inv, st.lambdaMB)
	c.Lambda.WorkerAPI = lambdaOf(reqs, st.lambdaMB)

	sources := map[string]map[string]int{"dispatch": f.dispatchOps.snapshot(), "worker_api": f.apiOps.snapshot(), "cli": cliOps, "ecs_launcher": f.ecsOps.snapshot()}
	c.DynamoDB, c.S3, c.Other = map[string]map[string]int{}, map[string]map[string]int{}, map[string]map[string]int{}
	for src, ops := range sources {
		for op, n := range ops {
			svc, name, _ := strings.Cut(op, ".")
			into := c.Other
			switch svc {
			case "DynamoDB":
				into, op = c.DynamoDB, name
			case "S3":
				into, op = c.S3, name
			}
			if into[src] == nil {
				into[src] = map[string]int{}
			}
			into[src][op] += n
		}
	}

	fg := &c.Fargate
	fg.CPUUnits, fg.MemoryMiB = st.cpu, st.memory
	vcpu, gb := float64(st.cpu)/1024, float64(st.memory)/1024
	for _, l := range f.launcher.launched() {
		if l.End.IsZero() {
			t.Errorf("worker %s never exited", l.Spec.TaskID)
			continue
		}
		s := stepOf[l.Spec.TaskID]
		sec := l.End.Sub(l.Start).Seconds()
		fg.Workers = append(fg.Workers, fargateWorker{Step: s.StepRef, WallMS: round(sec * 1000), VCPUSeconds: round(sec * vcpu), GBSeconds: round(sec * gb)})
		fg.VCPUSeconds += sec * vcpu
		fg.GBSeconds += sec * gb
		fg.BilledVCPUSeconds += max(sec, 60) * vcpu
		fg.BilledGBSeconds += max(sec, 60) * gb
	}
	fg.Tasks = len(fg.Workers)
	fg.VCPUSeconds, fg.GBSeconds, fg.BilledVCPUSeconds, fg.BilledGBSeconds = round(fg.VCPUSeconds), round(fg.GBSeconds), round(fg.BilledVCPUSeconds), round(fg.BilledGBSeconds)
	return c
}

func lambdaOf(inv []invocation, memoryMB int) lambdaFigures {
	l := lambdaFigures{Invocations: len(inv), ByWhat: map[string]int{}}
	var wall time.Duration
	for _, i := range inv {
		wall += i.Wall
		l.ByWhat[i.What]++
	}
	l.WallMS = round(float64(wall.Microseconds()) / 1000)
	l.GBSeconds = round(wall.Seconds() * float64(memoryMB) / 1024)
	return l
}

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// log prints the figures, one fact a line, in a stable order.
func (c *costFigures) log(t *testing.T) {
	t.Helper()
	t.Logf("cost: run %s flow %s steps %s wall_ms=%d", c.RunID, c.Flow, c.Steps, c.RunWallMS)
	t.Logf("cost: step_functions state_transitions=%d history_events=%d states_entered=%s", c.StepFunctions.StateTransitions, c.StepFunctions.HistoryEvents, kv(c.StepFunctions.StatesEntered))
	t.Logf("cost: sqs messages=%d", c.SQSMessages)
	for _, l := range []struct {
		name string
		f    lambdaFigures
	}{{"dispatch", c.Lambda.Dispatch}, {"worker_api", c.Lambda.WorkerAPI}} {
		t.Logf("cost: lambda %s invocations=%d wall_ms=%.3f gb_s=%.3f memory_mb=%d by=%s", l.name, l.f.Invocations, l.f.WallMS, l.f.GBSeconds, c.Lambda.MemoryMB, kv(l.f.ByWhat))
	}
	for _, svc := range []struct {
		name string
		m    map[string]map[string]int
	}{{"dynamodb", c.DynamoDB}, {"s3", c.S3}, {"other", c.Other}} {
		for _, src := range slices.Sorted(maps.Keys(svc.m)) {
			total := 0
			for _, n := range svc.m[src] {
				total += n
			}
			t.Logf("cost: %s %s total=%d %s", svc.name, src, total, kv(svc.m[src]))
		}
	}
	fg := c.Fargate
	t.Logf("cost: fargate tasks=%d cpu=%d memory_mib=%d vcpu_s=%.3f gb_s=%.3f billed_vcpu_s=%.3f billed_gb_s=%.3f", fg.Tasks, fg.CPUUnits, fg.MemoryMiB, fg.VCPUSeconds, fg.GBSeconds, fg.BilledVCPUSeconds, fg.BilledGBSeconds)
	for _, w := range fg.Workers {
		t.Logf("cost: fargate worker %s wall_ms=%.3f vcpu_s=%.3f gb_s=%.3f", w.Step, w.WallMS, w.VCPUSeconds, w.GBSeconds)
	}
}

// kv renders a map as sorted k=v pairs.
func kv(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", "_"), m[k]))
	}
	return strings.Join(parts, " ")
}
