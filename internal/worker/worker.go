package worker

import (
	"context"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker/artifact"
	"github.com/stratusflow/stratus/internal/worker/attempt"
	"github.com/stratusflow/stratus/internal/worker/bundle"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/degradation"
	"github.com/stratusflow/stratus/internal/worker/dispatch"
	"github.com/stratusflow/stratus/internal/worker/fetch"
	"github.com/stratusflow/stratus/internal/worker/hitl"
	"github.com/stratusflow/stratus/internal/worker/rendersize"
	"github.com/stratusflow/stratus/internal/worker/resolve"
	"github.com/stratusflow/stratus/internal/worker/stats"
	"github.com/stratusflow/stratus/internal/worker/submit"
	"github.com/stratusflow/stratus/internal/worker/supervise"
	"github.com/stratusflow/stratus/internal/worker/vars"
)

// Service is the worker service: its shared context (core.Service: the
// Config and the state its operations share) and the operations, one
// package each under internal/worker, as methods. Make one with New.
type Service struct {
	*core.Service
}

// New returns a Service wired by c.
func New(c Config) *Service {
	s := &core.Service{Config: c}
	s.Layers = core.Layers{
		StepEnded: func(e Event) { supervise.StepEnded(s, e) },
		SupervisorFailed: func(ctx context.Context, c *core.Caller, att stratus.Attempt, f core.Failure, reason string) (*StepValue, error) {
			return supervise.Failed(ctx, s, c, att, f, reason)
		},
	}
	return &Service{Service: s}
}

// The shapes of the worker API and the service's events, defined beside
// the shared context (internal/worker/core) and named here for the
// transports.
type (
	Config          = core.Config
	Blob            = core.Blob
	Body            = core.Body
	Bootstrapped    = core.Bootstrapped
	CommitChecker   = core.CommitChecker
	Context         = core.Context
	DegradationBody = core.DegradationBody
	EngineFile      = core.EngineFile
	EngineSpec      = core.EngineSpec
	Event           = core.Event
	FailureValue    = core.FailureValue
	HITLValue       = core.HITLValue
	HeadAdvance     = core.HeadAdvance
	Message         = core.Message
	Payload         = core.Payload
	Reply           = core.Reply
	ResultBody      = core.ResultBody
	RunEnv          = core.RunEnv
	Stats           = core.Stats
	StepPointer     = core.StepPointer
	StepValue       = core.StepValue
	SystemRef       = core.SystemRef
	Upload          = core.Upload
	UploadRequest   = core.UploadRequest
	WorkspaceSpec   = core.WorkspaceSpec
)

// The constants of the worker API and the service, defined in
// internal/worker/core and named here for the transports and the callers.
const (
	AnswerReasonBytes      = core.AnswerReasonBytes
	DecisionAnswer         = core.DecisionAnswer
	DecisionApprove        = core.DecisionApprove
	DecisionReject         = core.DecisionReject
	DefaultInlineBytes     = core.DefaultInlineBytes
	DefaultMaxUploadBytes  = core.DefaultMaxUploadBytes
	ErrDispatch            = core.ErrDispatch
	ErrInfrastructure      = core.ErrInfrastructure
	ErrProjection          = core.ErrProjection
	ErrWorkerFailed        = core.ErrWorkerFailed
	EventStepEnded         = core.EventStepEnded
	EventStepParked        = core.EventStepParked
	EventStepProgress      = core.EventStepProgress
	EventStepRetrying      = core.EventStepRetrying
	EventStepStarted       = core.EventStepStarted
	EventStepWaiting       = core.EventStepWaiting
	EventSupervisorEnded   = core.EventSupervisorEnded
	EventSupervisorStarted = core.EventSupervisorStarted
	MaxCostUSD             = core.MaxCostUSD
	MaxPendingUploads      = core.MaxPendingUploads
	MaxReasonBytes         = core.MaxReasonBytes
	OutcomeSkipped         = core.OutcomeSkipped
	SignalApproval         = core.SignalApproval
	SignalQuestion         = core.SignalQuestion
	StateDirName           = core.StateDirName
	StepWaiting            = core.StepWaiting
	SupervisorNode         = core.SupervisorNode
	UploadTTL              = core.UploadTTL
)

// The helpers the transports and the callers use, defined in
// internal/worker/core, hitl and vars and named here.
var (
	ErrNotPersisted = core.ErrNotPersisted
	CheckReplySize  = hitl.CheckReplySize
	DropUploads     = core.DropUploads
	NewFailureValue = core.NewFailureValue
	NodeEnabled     = vars.NodeEnabled
	PlausibleCost   = core.PlausibleCost
	PolicyOf        = core.PolicyOf
	ReadOutputFile  = core.ReadOutputFile
	ReportEnv       = core.ReportEnv
	Resolve         = resolve.Resolve
	WorkspaceKeys   = core.WorkspaceKeys
	WorkspaceRoot   = core.WorkspaceRoot
)

// RecordStats serves POST /v1/worker/stats: the attempt's cumulative
// counters, its heartbeat and its handle's renewal. Errors: stats.Invoke's.
func (s *Service) RecordStats(ctx context.Context, authorization string, st Stats) error {
	return stats.Invoke(ctx, s.Service, authorization, st)
}

// RecordDegradation serves POST /v1/worker/degradation: a tool's fallback,
// on the run's record. Errors: degradation.Invoke's.
func (s *Service) RecordDegradation(ctx context.Context, authorization string, d DegradationBody) error {
	return degradation.Invoke(ctx, s.Service, authorization, d)
}

// RenderSize serves GET /v1/agents/{name}/render-size to a worker of that
// agent. Errors: rendersize.Invoke's.
func (s *Service) RenderSize(ctx context.Context, authorization, agent string) (stratus.RenderSize, error) {
	return rendersize.Invoke(ctx, s.Service, authorization, agent)
}

// FetchPrompt serves GET /v1/worker/prompt: the attempt's payload,
// assembled now. Errors: fetch.Invoke's.
func (s *Service) FetchPrompt(ctx context.Context, authorization, tid string) (*Payload, error) {
	return fetch.Invoke(ctx, s.Service, authorization, tid)
}

// FetchSystem serves GET /v1/worker/prompt/system: an attempt's baked
// system prompt, byte for byte. Errors: fetch.System's.
func (s *Service) FetchSystem(ctx context.Context, authorization, tid, attempt string) ([]byte, error) {
	return fetch.System(ctx, s.Service, authorization, tid, attempt)
}

// Human applies a human's reply to the step of run runID's node that waits
// for one, and returns the step's value with the reply recorded. Errors:
// hitl.Invoke's.
func (s *Service) Human(ctx context.Context, runID, node string, r Reply) (*HITLValue, error) {
	return hitl.Invoke(ctx, s.Service, runID, node, r)
}

// AuthorizeOperator checks the operator credential of a human's reply to
// run runID. Errors: hitl.AuthorizeOperator's.
func (s *Service) AuthorizeOperator(authorization, runID string) error {
	return hitl.AuthorizeOperator(s.Service, authorization, runID)
}

// Artifact serves POST /v1/worker/artifact?name= with the part's bytes
// inline. Errors: artifact.Artifact's.
func (s *Service) Artifact(ctx context.Context, authorization, name string, body []byte) error {
	return artifact.Artifact(ctx, s.Service, authorization, name, body)
}

// StageArtifact serves POST /v1/worker/artifact?name=[&upload=]: one named
// part, inline or uploaded. Errors: artifact.Invoke's.
func (s *Service) StageArtifact(ctx context.Context, authorization, name string, b Body) error {
	return artifact.Invoke(ctx, s.Service, authorization, name, b)
}

// NewUpload serves POST /v1/worker/upload: where to PUT a body of
// req.Bytes bytes too large to send inline. Errors: artifact.NewUpload's.
func (s *Service) NewUpload(ctx context.Context, authorization string, req UploadRequest) (Upload, error) {
	return artifact.NewUpload(ctx, s.Service, authorization, req)
}

// WorkspaceUpload serves POST /v1/worker/workspace/upload: where a
// workspace-write step's bundle goes. Errors: bundle.Upload's.
func (s *Service) WorkspaceUpload(ctx context.Context, authorization string, req UploadRequest) (Upload, error) {
	return bundle.Upload(ctx, s.Service, authorization, req)
}

// ReadBlob serves GET /v1/worker/workspace/blob?key=. Errors: bundle.Read's.
func (s *Service) ReadBlob(ctx context.Context, authorization, key string) ([]byte, error) {
	return bundle.Read(ctx, s.Service, authorization, key)
}

// WriteBlob serves PUT /v1/worker/workspace/blob?key= with the body in
// memory. Errors: bundle.Write's.
func (s *Service) WriteBlob(ctx context.Context, authorization, key string, body []byte) error {
	return bundle.Write(ctx, s.Service, authorization, key, body)
}

// WriteBlobFrom serves PUT /v1/worker/workspace/blob?key=, the body read
// by read up to the limit it is given (bytes). Errors: bundle.WriteFrom's.
func (s *Service) WriteBlobFrom(ctx context.Context, authorization, key string, read func(limit int64) ([]byte, error)) error {
	return bundle.WriteFrom(ctx, s.Service, authorization, key, read)
}

// AdvanceHead serves POST /v1/worker/workspace/head: a workspace-write
// attempt moves its run's head. Errors: bundle.AdvanceHead's.
func (s *Service) AdvanceHead(ctx context.Context, authorization string, h HeadAdvance) error {
	return bundle.AdvanceHead(ctx, s.Service, authorization, h)
}

// Submit serves POST /v1/worker/submit with the final body inline, and
// answers the step value. Errors: submit.Invoke's.
func (s *Service) Submit(ctx context.Context, authorization, tid string, body []byte, ok bool) (*StepValue, error) {
	return submit.Invoke(ctx, s.Service, authorization, tid, body, ok)
}

// SubmitBody serves POST /v1/worker/submit[?upload=]: the final body,
// inline or uploaded. Errors: submit.Body's.
func (s *Service) SubmitBody(ctx context.Context, authorization, tid string, b Body, ok bool) (*StepValue, error) {
	return submit.Body(ctx, s.Service, authorization, tid, b, ok)
}

// Result serves POST /v1/worker/result {task_id, value, ok}. Errors:
// submit.Result's.
func (s *Service) Result(ctx context.Context, authorization string, rb ResultBody) (*StepValue, error) {
	return submit.Result(ctx, s.Service, authorization, rb)
}

// Dispatch handles one dispatch message: a step to start, a node to stop,
// or a supervisor observation. Errors: dispatch.Invoke's (the queue may
// deliver the message again).
func (s *Service) Dispatch(ctx context.Context, m Message) error {
	return dispatch.Invoke(ctx, s.Service, m)
}

// WorkerTaskStopped is told that a worker's ECS task stopped, and why: an
// attempt it left without a result fails now. Errors:
// attempt.WorkerTaskStopped's.
func (s *Service) WorkerTaskStopped(ctx context.Context, bootstrap, tid string, n int, why string) error {
	return attempt.WorkerTaskStopped(ctx, s.Service, bootstrap, tid, n, why)
}

// Rekick starts attempt n+1 of the running step of dispatch task tid and
// returns its number; the attempt before it is fenced from then on.
// Errors: attempt.Rekick's.
func (s *Service) Rekick(ctx context.Context, tid string) (int, error) {
	return attempt.Rekick(ctx, s.Service, tid)
}
