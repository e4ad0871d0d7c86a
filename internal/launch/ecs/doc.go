// Package ecs launches workers as ECS Fargate tasks: the AWS implementation of
// launch.Launcher (docs/architecture.md § The path of one step, step 4: RunTask
// on the runner task definition of the node's network profile), the counterpart
// of internal/launch/local.
//
// It owns the RunTask request: the cluster, the runner's task definition,
// launch type FARGATE, the awsvpc network configuration of the node's
// network_access (Config.Offline or Config.Online), and the container
// overrides that carry the worker's whole environment —
// STRATUS_API_URL, STRATUS_HANDLE and STRATUS_TASK_ID, nothing else: no
// task token, no AWS credential — checked against ECS's 8192-character
// limit on overrides before any call (ETOOLARGE, naming the size). It
// retries, with exponential backoff and full jitter (Config.Retry),
// RunTask answers that mean "not now": throttling (after the SDK's own
// retries), a ServerException, and failures[] reasons of capacity
// (RESOURCE:*, "Capacity is unavailable at this time"). When those
// retries run out the error wraps launch.ErrInfrastructure, which
// dispatch reports as stratus.InfrastructureFailed: the compiled machine
// parks the run at manual_action_required and charges no rework budget.
// Any other refusal (a missing cluster or task definition, a bad subnet)
// is returned at once as an ordinary launch error. Stop calls
// ecs:StopTask; a task already gone is not an error.
//
// The two network profiles (Config fields, set by the deployment):
//
//   - Offline (network_access false, the default of every node): the
//     offline subnets and a security group whose only egress is HTTPS —
//     to any address, since the worker API (a public HTTP API), S3 and
//     the model provider the engine calls are public addresses. The
//     node's offline stance is the engine's (docs/security.md § Network
//     profiles); a boundary at the network is the offline subnets' routes
//     through a firewall with a domain allow-list.
//   - Online (network_access true): subnets and a security group with
//     internet egress (a NAT gateway, or public subnets with
//     AssignPublicIP), for nodes granted the network.
//
// A publish node's worker (launch.Spec.Publisher) runs
// Config.PublisherTaskDefinition on the Online profile, whatever its
// network_access: it pushes to the git host, and its task definition's
// container is the only one that gets the git token secret
// (docs/architecture.md § Publishing). Its overrides are any worker's;
// the token is never one.
//
// What it deliberately does not do: report a worker's exit (on AWS the
// ECS task-stopped event plays launch.Spec.OnExit's part; Spec.OnExit and
// Spec.LogPath are ignored — the task's log goes to CloudWatch through
// the task definition), register task definitions, or choose capacity
// providers.
package ecs
