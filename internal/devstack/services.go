package devstack

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// poolService is one of the stack's warm runner pool services
// (template.yaml PoolService, NetworkPoolService): its task definition and
// the network its tasks are placed on.
type poolService struct {
	name           string // the service's logical id: its tasks' startedBy is "ecs-svc/<name>"
	taskDefinition string
	subnets        []string
	securityGroups []string
}

// poolServices are the stack's pool services (none without RunnerPool).
func (st *Stack) poolServices() []poolService {
	var out []poolService
	if td := st.Resources["PoolTaskDefinition"]; td != "" {
		out = append(out, poolService{"PoolService", td, st.Subnets, st.SecurityGroups})
	}
	if td := st.Resources["NetworkPoolTaskDefinition"]; td != "" {
		out = append(out, poolService{"NetworkPoolService", td, st.NetworkSubnets, st.NetworkSecurityGroups})
	}
	return out
}

// runServices plays the ECS service scheduler for the pool services, which
// moto creates but places no task of: every poll it keeps desired tasks of
// each service running on the stand-in's cluster, starting (RunTask) one
// for each that is missing — at first, and after a task stops, as a
// service replaces it. The Fargate stand-in runs them like any task. It
// returns when ctx ends.
func runServices(ctx context.Context, ecs *awsecs.Client, st *Stack, desired int, poll time.Duration, log io.Writer) {
	for {
		for _, s := range st.poolServices() {
			by := "ecs-svc/" + s.name
			out, err := ecs.ListTasks(ctx, &awsecs.ListTasksInput{Cluster: aws.String(st.Cluster), StartedBy: aws.String(by), DesiredStatus: ecstypes.DesiredStatusRunning})
			if err != nil {
				if ctx.Err() == nil {
					fmt.Fprintf(log, "pool: ListTasks of %s: %v\n", s.name, err)
				}
				continue
			}
			for n := len(out.TaskArns); n < desired; n++ {
				_, err := ecs.RunTask(ctx, &awsecs.RunTaskInput{Cluster: aws.String(st.Cluster), TaskDefinition: aws.String(s.taskDefinition),
					LaunchType: ecstypes.LaunchTypeFargate, StartedBy: aws.String(by),
					NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{
						Subnets: s.subnets, SecurityGroups: s.securityGroups, AssignPublicIp: ecstypes.AssignPublicIpDisabled}}})
				if err != nil {
					if ctx.Err() == nil {
						fmt.Fprintf(log, "pool: RunTask for %s: %v\n", s.name, err)
					}
					break
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		}
	}
}
