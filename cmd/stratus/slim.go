//go:build slim

package main

import (
	"context"

	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/progress"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/worker"
)

// The slim build links neither the AWS SDK nor the run viewer (their package
// init was most of the start time). main hands the commands that need them to
// FullBinary before they start (wantsFull); these stand-ins for runaws.go,
// target_aws.go, devaws.go and uiserve.go hand off whatever reaches them all
// the same, so that a command wantsFull missed behaves as in the full build.

const fullBuild = false

func runRunAWS(*RunOptions) error                      { return handOff() }
func resumeAWS(*ResumeOptions, lifecycle.Resume) error { return handOff() }
func cancelOnAWS(context.Context, *CancelOptions) (CancelResult, error) {
	return CancelResult{}, handOff()
}
func awsStatus(context.Context, *StatusOptions) (*runview.View, StatusResult, error) {
	return nil, StatusResult{}, handOff()
}
func followAWS(context.Context, *StatusOptions, *progress.Display) error { return handOff() }
func (*AWSOptions) openRecords(context.Context) (store.Store, sink.Sink, error) {
	return nil, nil, handOff()
}
func (*AWSOptions) openPool(context.Context, string) (store.Store, poolLister, error) {
	return nil, nil, handOff()
}
func replyAWS(context.Context, *HITLOptions, worker.Reply) (*worker.HITLValue, error) {
	return nil, handOff()
}
func runDevAWS(*DevAWSOptions) error { return handOff() }
func submitAWS(context.Context, *SubmitOptions) ([]SubmitResult, error) {
	return nil, handOff()
}
func runRunnerPool(*RunnerPoolOptions) error  { return handOff() }
func runUI(context.Context, *UIOptions) error { return handOff() }

// deniedHint has nothing to say: this build makes no AWS call.
func deniedHint(error) string { return "" }
