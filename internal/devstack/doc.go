// Package devstack is `stratus dev aws`: a Stratus stack on a local AWS
// stand-in (moto, started by devstack/moto). Create deploys template.yaml
// as `sam deploy` does — the SAM translator's transform (sam_transform.py,
// run with python3), the functions' code and the state machine definitions
// uploaded as `sam package` leaves them, a real CloudFormation stack on
// the stand-in — and Load reads a deployed stack back from its outputs and
// resources: the Stack the rest uses is never a second description of the
// template (README "What dev aws emulates"). Serve plays what the stand-in
// cannot run: the functions and Fargate.
//
// It does not validate the template (cfn-lint does, in CI) nor emulate
// AWS beyond what moto and the models moto_server.py registers give.
package devstack
